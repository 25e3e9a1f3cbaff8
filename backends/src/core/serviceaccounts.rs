//! ServiceAccounts (`/api/v1/namespaces/{ns}/serviceaccounts`, short name `sa`): kube's
//! strategy only trims `secrets[]` references down to their names; there is nothing to
//! validate beyond metadata. The `token` subresource (TokenRequest) is not served here:
//! it needs the token signer, which is not part of the core registry.

use std::sync::Arc;

use serde_json::{json, Value};

use super::{age, base_def, len_at, Names};
use crate::resource::{age_column, name_column, ResourceDef, Strategy, TableColumn};

/// The ServiceAccount resource.
pub fn def() -> ResourceDef {
    let mut def = base_def(
        Names {
            group: "",
            version: "v1",
            plural: "serviceaccounts",
            singular: "serviceaccount",
            kind: "ServiceAccount",
            namespaced: true,
            definition: "io.k8s.api.core.v1.ServiceAccount",
        },
        Arc::new(ServiceAccountStrategy),
    );
    def.short_names = vec!["sa".into()];
    def.columns = vec![
        name_column(),
        TableColumn {
            name: "Secrets".into(),
            type_: "string".into(),
            format: "".into(),
            description: "Secrets is a list of the secrets in the same namespace that pods running using this ServiceAccount are allowed to use. Pods are only limited to this list if this service account has a \"kubernetes.io/enforce-mountable-secrets\" annotation set to \"true\". The \"kubernetes.io/enforce-mountable-secrets\" annotation is deprecated since v1.32. Prefer separate namespaces to isolate access to mounted secrets. This field should not be used to find auto-generated service account token secrets for use outside of pods. Instead, tokens can be requested directly using the TokenRequest API, or service account token secrets can be manually created. More info: https://kubernetes.io/docs/concepts/configuration/secret".into(),
            priority: 0,
        },
        age_column(),
    ];
    def.patch_meta = &[("secrets", "merge", "name")];
    def
}

/// kube's serviceaccount strategy.
pub struct ServiceAccountStrategy;

impl Strategy for ServiceAccountStrategy {
    /// kube's storage sets `ReturnDeletedObject`: a DELETE answers with the object.
    fn return_deleted_object(&self) -> bool {
        true
    }

    /// kube's `warnIfHasEnforceMountableSecretsAnnotation`: on create, and on an update that
    /// adds the annotation.
    fn warnings(&self, object: &Value, old: Option<&Value>) -> Vec<String> {
        const ANNOTATION: &str = "kubernetes.io/enforce-mountable-secrets";
        let has = |v: &Value| {
            v.pointer("/metadata/annotations")
                .and_then(|a| a.get(ANNOTATION))
                .is_some()
        };
        if has(object) && !old.is_some_and(has) {
            vec![format!(
                "metadata.annotations[{ANNOTATION}]: deprecated in v1.32+; prefer separate namespaces to isolate access to mounted secrets"
            )]
        } else {
            Vec::new()
        }
    }

    fn prepare_for_create(&self, object: &mut Value) {
        clean_secret_references(object);
    }

    fn prepare_for_update(&self, object: &mut Value, _old: &Value) {
        clean_secret_references(object);
    }

    fn table_cells(&self, object: &Value) -> Vec<Value> {
        vec![json!(len_at(object, "/secrets")), json!(age(object))]
    }
}

/// kube's `cleanSecretReferences`: a reference keeps only its name (secrets are always in
/// the service account's namespace, and uid/resourceVersion would only go stale).
fn clean_secret_references(object: &mut Value) {
    if let Some(list) = object.get_mut("secrets").and_then(Value::as_array_mut) {
        for reference in list.iter_mut() {
            let name = reference.get("name").cloned();
            *reference = match name {
                Some(n) => json!({"name": n}),
                None => json!({}),
            };
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_mountable_secrets_annotation_is_warned_about_when_it_arrives() {
        let with = json!({"metadata": {"name": "a", "annotations": {"kubernetes.io/enforce-mountable-secrets": "true"}}});
        let without = json!({"metadata": {"name": "a"}});
        let warned = ServiceAccountStrategy.warnings(&with, None);
        assert_eq!(warned, vec!["metadata.annotations[kubernetes.io/enforce-mountable-secrets]: deprecated in v1.32+; prefer separate namespaces to isolate access to mounted secrets"]);
        assert_eq!(
            ServiceAccountStrategy.warnings(&with, Some(&without)),
            warned
        );
        assert!(ServiceAccountStrategy
            .warnings(&with, Some(&with))
            .is_empty());
        assert!(ServiceAccountStrategy.warnings(&without, None).is_empty());
    }

    #[test]
    fn secret_references_keep_only_names() {
        let mut sa = json!({"metadata": {"name": "builder"}, "secrets": [{"name": "tok", "namespace": "x", "uid": "u"}]});
        ServiceAccountStrategy.prepare_for_create(&mut sa);
        assert_eq!(sa["secrets"], json!([{"name": "tok"}]));
        let cells = ServiceAccountStrategy.table_cells(&sa);
        assert_eq!(cells[0], json!(1));
        assert_eq!(def().patch_meta, &[("secrets", "merge", "name")]);
    }
}
