//! Placeholder: filled in by the authorization work.
