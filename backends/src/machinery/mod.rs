//! API machinery shared by every resource: selectors, patches, content negotiation, name
//! validation, Table output and protobuf bodies.

pub mod negotiation;
pub mod patch;
pub mod protobuf;
pub mod selectors;
pub mod table;
pub mod validation;
