//! The JSON form of `apiextensions.k8s.io/v1` messages (CustomResourceDefinition and its
//! OpenAPI schema), which client-go's typed clients send and read as protobuf. Tables as in
//! `messages.rs`; the schema's union types (`JSONSchemaPropsOrBool`, `...OrArray`,
//! `...OrStringArray`) and its free-form `JSON` values have the hand-written JSON forms of
//! apiextensions' `marshal.go`.

use k8s_pb::apiextensions_apiserver::pkg::apis::apiextensions::v1 as extv1;
use serde_json::Value;

use super::convert::{mismatch, Conv, ConvError, Field, FieldFrom, Fields, FromJson, Obj, ToJson};
use super::messages::messages;
use super::shape::{Pass, Shape, Shaper};

messages! {
    extv1::CustomResourceDefinition {
        omit "metadata" => metadata,
        req "spec" => spec,
        omit "status" => status,
    }
    extv1::CustomResourceDefinitionList {
        omit "metadata" => metadata,
        req "items" => items,
    }
    extv1::CustomResourceDefinitionSpec {
        req "group" => group,
        req "names" => names,
        req "scope" => scope,
        req "versions" => versions,
        ptr "conversion" => conversion,
        omit "preserveUnknownFields" => preserve_unknown_fields,
    }
    extv1::CustomResourceConversion {
        req "strategy" => strategy,
        ptr "webhook" => webhook,
    }
    extv1::WebhookConversion {
        ptr "clientConfig" => client_config,
        req "conversionReviewVersions" => conversion_review_versions,
    }
    extv1::WebhookClientConfig {
        ptr "url" => url,
        ptr "service" => service,
        omit "caBundle" => ca_bundle,
    }
    extv1::ServiceReference {
        req "namespace" => namespace,
        req "name" => name,
        ptr "path" => path,
        ptr "port" => port,
    }
    extv1::CustomResourceDefinitionVersion {
        req "name" => name,
        req "served" => served,
        req "storage" => storage,
        omit "deprecated" => deprecated,
        ptr "deprecationWarning" => deprecation_warning,
        ptr "schema" => schema,
        ptr "subresources" => subresources,
        omit "additionalPrinterColumns" => additional_printer_columns,
        omit "selectableFields" => selectable_fields,
    }
    extv1::SelectableField {
        req "jsonPath" => json_path,
    }
    extv1::CustomResourceColumnDefinition {
        req "name" => name,
        req "type" => r#type,
        omit "format" => format,
        omit "description" => description,
        omit "priority" => priority,
        req "jsonPath" => json_path,
    }
    extv1::CustomResourceDefinitionNames {
        req "plural" => plural,
        omit "singular" => singular,
        omit "shortNames" => short_names,
        req "kind" => kind,
        omit "listKind" => list_kind,
        omit "categories" => categories,
    }
    extv1::CustomResourceDefinitionCondition {
        req "type" => r#type,
        req "status" => status,
        omit "lastTransitionTime" => last_transition_time,
        omit "reason" => reason,
        omit "message" => message,
        // Added in kube 1.34 (after the 1.33 kubegate serves): written only when set.
        ptr "observedGeneration" => observed_generation,
    }
    extv1::CustomResourceDefinitionStatus {
        req "conditions" => conditions,
        req "acceptedNames" => accepted_names,
        req "storedVersions" => stored_versions,
        // Added in kube 1.34, as in the conditions.
        ptr "observedGeneration" => observed_generation,
    }
    extv1::CustomResourceValidation {
        ptr "openAPIV3Schema" => open_apiv3_schema,
    }
    extv1::CustomResourceSubresources {
        ptr "status" => status,
        ptr "scale" => scale,
    }
    extv1::CustomResourceSubresourceStatus {}
    extv1::CustomResourceSubresourceScale {
        req "specReplicasPath" => spec_replicas_path,
        req "statusReplicasPath" => status_replicas_path,
        ptr "labelSelectorPath" => label_selector_path,
    }
    extv1::ExternalDocumentation {
        omit "description" => description,
        omit "url" => url,
    }
    extv1::ValidationRule {
        req "rule" => rule,
        omit "message" => message,
        omit "messageExpression" => message_expression,
        ptr "reason" => reason,
        omit "fieldPath" => field_path,
        ptr "optionalOldSelf" => optional_old_self,
    }
    extv1::JsonSchemaProps {
        omit "id" => id,
        omit "$schema" => schema,
        ptr "$ref" => r#ref,
        omit "description" => description,
        omit "type" => r#type,
        omit "format" => format,
        omit "title" => title,
        ptr "default" => default,
        ptr "maximum" => maximum,
        omit "exclusiveMaximum" => exclusive_maximum,
        ptr "minimum" => minimum,
        omit "exclusiveMinimum" => exclusive_minimum,
        ptr "maxLength" => max_length,
        ptr "minLength" => min_length,
        omit "pattern" => pattern,
        ptr "maxItems" => max_items,
        ptr "minItems" => min_items,
        omit "uniqueItems" => unique_items,
        ptr "multipleOf" => multiple_of,
        omit "enum" => r#enum,
        ptr "maxProperties" => max_properties,
        ptr "minProperties" => min_properties,
        omit "required" => required,
        ptr "items" => items,
        omit "allOf" => all_of,
        omit "oneOf" => one_of,
        omit "anyOf" => any_of,
        ptr "not" => not,
        omit "properties" => properties,
        ptr "additionalProperties" => additional_properties,
        omit "patternProperties" => pattern_properties,
        omit "dependencies" => dependencies,
        ptr "additionalItems" => additional_items,
        omit "definitions" => definitions,
        ptr "externalDocs" => external_docs,
        ptr "example" => example,
        omit "nullable" => nullable,
        ptr "x-kubernetes-preserve-unknown-fields" => x_kubernetes_preserve_unknown_fields,
        omit "x-kubernetes-embedded-resource" => x_kubernetes_embedded_resource,
        omit "x-kubernetes-int-or-string" => x_kubernetes_int_or_string,
        omit "x-kubernetes-list-map-keys" => x_kubernetes_list_map_keys,
        ptr "x-kubernetes-list-type" => x_kubernetes_list_type,
        ptr "x-kubernetes-map-type" => x_kubernetes_map_type,
        omit "x-kubernetes-validations" => x_kubernetes_validations,
    }
}

/// `JSON` (a schema's `default`, `example`, `enum` entries): any JSON value, kept as its
/// bytes in protobuf. Go writes no bytes as `null`.
impl ToJson for extv1::Json {
    fn to_json(&self) -> Conv {
        match self.raw.as_deref() {
            None | Some([]) => Ok(Value::Null),
            Some(raw) => serde_json::from_slice(raw)
                .map_err(|e| ConvError::new(format!("not valid JSON: {e}"))),
        }
    }
}

impl FromJson for extv1::Json {
    fn from_json(value: &Value) -> Result<Self, ConvError> {
        if value.is_null() {
            return Ok(extv1::Json { raw: None });
        }
        let raw = serde_json::to_vec(value)
            .map_err(|e| ConvError::new(format!("cannot be written as JSON: {e}")))?;
        Ok(extv1::Json { raw: Some(raw) })
    }
}

/// `additionalProperties` / `additionalItems`: a schema, or a boolean (`false` only when
/// there is no schema and it does not allow).
impl ToJson for extv1::JsonSchemaPropsOrBool {
    fn to_json(&self) -> Conv {
        match &self.schema {
            Some(schema) => schema.to_json(),
            None => Ok(Value::Bool(self.allows.unwrap_or(false))),
        }
    }
}

impl FromJson for extv1::JsonSchemaPropsOrBool {
    fn from_json(value: &Value) -> Result<Self, ConvError> {
        match value {
            Value::Null => Ok(Self::default()),
            Value::Bool(allows) => Ok(Self {
                allows: Some(*allows),
                schema: None,
            }),
            Value::Object(_) => Ok(Self {
                allows: Some(true),
                schema: Some(Box::new(extv1::JsonSchemaProps::from_json(value)?)),
            }),
            other => Err(mismatch("a schema or a boolean", other)),
        }
    }
}

/// `items`: one schema, or an array of schemas.
impl ToJson for extv1::JsonSchemaPropsOrArray {
    fn to_json(&self) -> Conv {
        if !self.j_son_schemas.is_empty() {
            return self.j_son_schemas.required();
        }
        match &self.schema {
            Some(schema) => schema.to_json(),
            None => Ok(Value::Null),
        }
    }
}

impl FromJson for extv1::JsonSchemaPropsOrArray {
    fn from_json(value: &Value) -> Result<Self, ConvError> {
        match value {
            Value::Null => Ok(Self::default()),
            Value::Array(_) => Ok(Self {
                schema: None,
                j_son_schemas: FieldFrom::value(Some(value))?,
            }),
            Value::Object(_) => Ok(Self {
                schema: Some(Box::new(extv1::JsonSchemaProps::from_json(value)?)),
                j_son_schemas: Vec::new(),
            }),
            other => Err(mismatch("a schema or an array of schemas", other)),
        }
    }
}

/// A `dependencies` entry: a schema, or the names of the properties required with it.
impl ToJson for extv1::JsonSchemaPropsOrStringArray {
    fn to_json(&self) -> Conv {
        if !self.property.is_empty() {
            return Ok(Value::from(self.property.clone()));
        }
        match &self.schema {
            Some(schema) => schema.to_json(),
            None => Ok(Value::Null),
        }
    }
}

impl FromJson for extv1::JsonSchemaPropsOrStringArray {
    fn from_json(value: &Value) -> Result<Self, ConvError> {
        match value {
            Value::Null => Ok(Self::default()),
            Value::Array(_) => Ok(Self {
                schema: None,
                property: FieldFrom::value(Some(value))?,
            }),
            Value::Object(_) => Ok(Self {
                schema: Some(extv1::JsonSchemaProps::from_json(value)?),
                property: Vec::new(),
            }),
            other => Err(mismatch("a schema or an array of strings", other)),
        }
    }
}

/// Any JSON value: kept as it is.
impl Shape for extv1::Json {}

/// A schema, or a boolean.
impl Shape for extv1::JsonSchemaPropsOrBool {
    fn shape(value: &mut Value, pass: Pass) {
        if value.is_object() {
            extv1::JsonSchemaProps::shape(value, pass);
        }
    }
}

/// One schema, or an array of schemas.
impl Shape for extv1::JsonSchemaPropsOrArray {
    fn shape(value: &mut Value, pass: Pass) {
        match value {
            Value::Array(schemas) => schemas
                .iter_mut()
                .for_each(|schema| extv1::JsonSchemaProps::shape(schema, pass)),
            Value::Object(_) => extv1::JsonSchemaProps::shape(value, pass),
            _ => {}
        }
    }
}

/// A schema, or the names of properties.
impl Shape for extv1::JsonSchemaPropsOrStringArray {
    fn shape(value: &mut Value, pass: Pass) {
        if value.is_object() {
            extv1::JsonSchemaProps::shape(value, pass);
        }
    }
}
