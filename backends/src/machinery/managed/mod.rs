//! Field ownership (`metadata.managedFields`) and server-side apply, as kube-apiserver's field
//! manager keeps them: the paths and sets of fields (`path`), a kind's shape as apply sees it
//! (`types`), the typed walks (`walk`) and the managers' bookkeeping (`manager`).

mod manager;
mod path;
mod types;
mod walk;

pub use manager::{
    decode, ApplyError, Conflicts, Entry, FieldManager, Operation, LAST_APPLIED_ANNOTATION,
};
pub use path::{path_string, FieldSet, Path, PathElement};
pub use types::{ListKind, Node, TypeId, TypeModel};
pub use walk::{associative_list_errors, compare, merge, to_field_set, Comparison};

#[cfg(test)]
mod tests;
