//! # kubegate-backends
//!
//! What kubegate serves requests from: storage engines and the watch cache, the resource
//! data model, the generic registry that implements the Kubernetes REST semantics over it,
//! the built-in core resources, discovery and OpenAPI documents generated from the same
//! resource data, and the API machinery they share (Status errors, content negotiation,
//! patches, selectors, Table output, protobuf bodies).
//!
//! How to use: open a [`storage::Store`], start a [`storage::cacher::Cacher`] over it, build
//! a [`registry::Registry`] from [`core::builtin_resources`], and hand it [`api::ApiRequest`]s.

// `ApiError` carries its Status details inline so errors are built where they happen;
// boxing them would only move the allocation.
#![allow(clippy::result_large_err)]

pub mod api;
pub mod core;
pub mod discovery;
pub mod machinery;
pub mod openapi;
pub mod registry;
pub mod resource;
pub mod status;
pub mod storage;

pub use api::{ApiRequest, ApiResponse};
pub use resource::{ResourceDef, Strategy};
pub use status::{ApiError, ApiResult, GroupResource};
