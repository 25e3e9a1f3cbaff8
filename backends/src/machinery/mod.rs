//! API machinery shared by every resource: selectors, patches, content negotiation, name
//! validation, Table output, protobuf bodies and the structural schemas of custom resources.

pub mod managed;
pub mod negotiation;
pub mod patch;
pub mod protobuf;
pub mod schema;
pub mod selectors;
pub mod table;
pub mod validation;
