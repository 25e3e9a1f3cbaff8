//! Table-driven tests of the schema machinery against kube's behaviour: structural checks,
//! object validation messages, pruning and defaulting.

use serde_json::{json, Value};

use super::*;

fn rendered(causes: &[StatusCause]) -> Vec<String> {
    causes.iter().map(render).collect()
}

fn crontab_schema() -> Value {
    json!({
        "type": "object",
        "properties": {
            "spec": {
                "type": "object",
                "required": ["cronSpec"],
                "properties": {
                    "cronSpec": {"type": "string", "pattern": r"^(\d+|\*)(/\d+)?(\s+(\d+|\*)(/\d+)?){4}$"},
                    "image": {"type": "string", "maxLength": 10},
                    "replicas": {"type": "integer", "minimum": 1, "maximum": 10, "default": 1},
                    "mode": {"type": "string", "enum": ["a", "b"]},
                    "port": {"x-kubernetes-int-or-string": true},
                    "when": {"type": "string", "format": "date-time"},
                    "ratio": {"type": "number", "nullable": true},
                    "tags": {"type": "array", "maxItems": 2, "items": {"type": "string"},
                             "x-kubernetes-list-type": "set"},
                    "ports": {"type": "array", "x-kubernetes-list-type": "map",
                              "x-kubernetes-list-map-keys": ["name"],
                              "items": {"type": "object", "required": ["name"], "properties": {
                                  "name": {"type": "string"}, "port": {"type": "integer", "format": "int32"}}}},
                    "labels": {"type": "object", "maxProperties": 1,
                               "additionalProperties": {"type": "string", "minLength": 2}},
                    "free": {"type": "object", "x-kubernetes-preserve-unknown-fields": true,
                             "properties": {"known": {"type": "object", "properties": {"a": {"type": "string"}}}}},
                    "template": {"type": "object", "x-kubernetes-embedded-resource": true,
                                 "x-kubernetes-preserve-unknown-fields": true},
                },
            },
            "status": {"type": "object", "properties": {"replicas": {"type": "integer"}}},
        },
    })
}

#[test]
fn structural_schema_rules_match_kube() {
    let p = "spec.validation.openAPIV3Schema";
    let cases: Vec<(Value, Vec<&str>)> = vec![
        (crontab_schema(), vec![]),
        (
            json!({"type": "object", "properties": {"spec": {"properties": {"a": {"type": "string"}}}}}),
            vec!["spec.validation.openAPIV3Schema.properties[spec].type: Required value: must not be empty for specified object fields"],
        ),
        (
            json!({"properties": {"a": {"type": "string"}}}),
            vec!["spec.validation.openAPIV3Schema.type: Required value: must not be empty at the root"],
        ),
        (
            json!({"type": "string"}),
            vec!["spec.validation.openAPIV3Schema.type: Invalid value: \"string\": must be object at the root"],
        ),
        (
            json!({"type": "object", "properties": {"a": {"type": "array"}}}),
            vec!["spec.validation.openAPIV3Schema.properties[a].items: Required value: must be specified"],
        ),
        (
            json!({"type": "object", "properties": {"a": {"type": "array", "items": {}}}}),
            vec!["spec.validation.openAPIV3Schema.properties[a].items.type: Required value: must not be empty for specified array items"],
        ),
        (
            json!({"type": "object", "properties": {"a": {"x-kubernetes-preserve-unknown-fields": true}, "b": {"x-kubernetes-int-or-string": true}}}),
            vec![],
        ),
        (
            json!({"type": "object", "properties": {"a": {"type": "string", "anyOf": [{"type": "string"}, {"maxLength": 3, "description": "d"}]}}}),
            vec![
                "spec.validation.openAPIV3Schema.properties[a].anyOf[0].type: Forbidden: must be empty to be structural",
                "spec.validation.openAPIV3Schema.properties[a].anyOf[1].description: Forbidden: must be empty to be structural",
            ],
        ),
        (
            json!({"type": "object", "properties": {"a": {"x-kubernetes-int-or-string": true, "anyOf": [{"type": "integer"}, {"type": "string"}]}}}),
            vec![],
        ),
        (
            json!({"type": "object", "properties": {"metadata": {"type": "object", "properties": {"name": {"type": "string", "maxLength": 5}}}}}),
            vec![],
        ),
        (
            json!({"type": "object", "properties": {"metadata": {"type": "object", "properties": {"labels": {"type": "object"}}}}}),
            vec!["spec.validation.openAPIV3Schema.properties[metadata]: Forbidden: must not specify anything other than name and generateName, but metadata is implicitly specified"],
        ),
        (
            json!({"type": "object", "additionalProperties": {"type": "string"}}),
            vec!["spec.validation.openAPIV3Schema.additionalProperties: Forbidden: must not be used at the root"],
        ),
        (
            json!({"type": "object", "anyOf": [{"properties": {"missing": {"minLength": 1}}}]}),
            vec!["spec.validation.openAPIV3Schema.properties[missing]: Required value: because it is defined in spec.validation.openAPIV3Schema.anyOf[0].properties[missing]"],
        ),
        (
            json!({"type": "object", "properties": {"e": {"type": "object", "x-kubernetes-embedded-resource": true}}}),
            vec!["spec.validation.openAPIV3Schema.properties[e].properties: Required value: must not be empty if x-kubernetes-embedded-resource is true without x-kubernetes-preserve-unknown-fields"],
        ),
        (
            json!({"type": "object", "properties": {"a": {"type": "string", "pattern": "(ab"}}}),
            vec!["spec.validation.openAPIV3Schema.properties[a].pattern: Invalid value: \"(ab\": must be a valid regular expression, but isn't: error parsing regexp: missing closing ): `(ab`"],
        ),
    ];
    for (schema, want) in cases {
        let got = validate_structural(p, &Schema::from_json(&schema));
        assert_eq!(rendered(&got), want, "{schema}");
    }
}

#[test]
fn schema_validate_reports_like_kube_openapi() {
    let schema = Schema::from_json(&crontab_schema());
    let ok = json!({"apiVersion": "stable.example.com/v1", "kind": "CronTab", "metadata": {"name": "x"},
        "spec": {"cronSpec": "* * * * */5", "image": "img", "replicas": 3, "port": "http",
                 "when": "2024-05-01T10:00:00Z", "ratio": null, "tags": ["a", "b"],
                 "ports": [{"name": "a", "port": 1}, {"name": "b", "port": 2}],
                 "labels": {"k": "vv"}, "free": {"anything": 1}}});
    assert_eq!(validate(&schema, &ok), Vec::new());

    let cases: Vec<(Value, Vec<&str>)> = vec![
        (json!({"replicas": "string"}), vec![
            "spec.replicas: Invalid value: \"string\": spec.replicas in body must be of type integer: \"string\"",
            "spec.cronSpec: Required value",
        ]),
        (json!({"cronSpec": "* * * * *", "replicas": 11}), vec![
            "spec.replicas: Invalid value: 11: spec.replicas in body should be less than or equal to 10",
        ]),
        (json!({"cronSpec": "* * * * *", "replicas": 0}), vec![
            "spec.replicas: Invalid value: 0: spec.replicas in body should be greater than or equal to 1",
        ]),
        (json!({"cronSpec": "* * * * *", "replicas": 1.5}), vec![
            "spec.replicas: Invalid value: \"number\": spec.replicas in body must be of type integer: \"number\"",
        ]),
        (json!({"cronSpec": "nope"}), vec![
            r#"spec.cronSpec: Invalid value: "nope": spec.cronSpec in body should match '^(\d+|\*)(/\d+)?(\s+(\d+|\*)(/\d+)?){4}$'"#,
        ]),
        (json!({"cronSpec": "* * * * *", "image": "a-very-long-image"}), vec![
            "spec.image: Too long: may not be more than 10 bytes",
        ]),
        (json!({"cronSpec": "* * * * *", "mode": "c"}), vec![
            "spec.mode: Unsupported value: \"c\": supported values: \"a\", \"b\"",
        ]),
        (json!({"cronSpec": "* * * * *", "port": true}), vec![
            "spec.port: Invalid value: \"boolean\": spec.port in body must be of type integer,string: \"boolean\"",
        ]),
        (json!({"cronSpec": "* * * * *", "when": "yesterday"}), vec![
            "spec.when: Invalid value: \"yesterday\": spec.when in body must be of type date-time: \"yesterday\"",
        ]),
        (json!({"cronSpec": "* * * * *", "image": null}), vec![
            "spec.image: Invalid value: \"null\": spec.image in body must be of type string: \"null\"",
        ]),
        (json!({"cronSpec": "* * * * *", "tags": ["a", "b", "a"]}), vec![
            "spec.tags: Too many: 3: must have at most 2 items",
            "spec.tags[2]: Duplicate value: \"a\"",
        ]),
        (json!({"cronSpec": "* * * * *", "ports": [{"name": "a"}, {"name": "a"}, {"port": 3}]}), vec![
            "spec.ports[2].name: Required value",
            "spec.ports[1]: Duplicate value: map[string]interface {}{\"name\":\"a\"}",
        ]),
        (json!({"cronSpec": "* * * * *", "ports": [{"name": "a", "port": 3000000000_u64}]}), vec![
            "<nil>: Invalid value: \"\": Checked value must be of type integer with format int32 in spec.ports[0].port",
        ]),
        (json!({"cronSpec": "* * * * *", "labels": {"a": "x", "b": "yy"}}), vec![
            "spec.labels: Too many: 2: must have at most 1 items",
            "spec.labels.a: Invalid value: \"x\": spec.labels.a in body should be at least 2 chars long",
        ]),
        (json!({"cronSpec": "* * * * *", "free": {"known": {"a": 1}}}), vec![
            "spec.free.known.a: Invalid value: \"integer\": spec.free.known.a in body must be of type string: \"integer\"",
        ]),
    ];
    for (spec, want) in cases {
        let object = json!({"spec": spec});
        assert_eq!(rendered(&validate(&schema, &object)), want, "{spec}");
    }
    let type_cause = validate(&schema, &json!({"spec": {"cronSpec": 5}}));
    assert_eq!(type_cause[0].reason, "FieldValueTypeInvalid");

    // The logical junctors report with kube-openapi's composite messages.
    let junctors = Schema::from_json(&json!({"type": "object", "properties": {
        "a": {"type": "string", "anyOf": [{"maxLength": 1}, {"pattern": "^x"}]},
        "b": {"type": "integer", "not": {"minimum": 5}},
        "c": {"type": "object", "additionalProperties": false, "properties": {"ok": {"type": "string"}}},
    }}));
    let got = rendered(&validate(
        &junctors,
        &json!({"a": "yyy", "b": 6, "c": {"ok": "1", "bad": 2}}),
    ));
    assert_eq!(
        got,
        [
            "<nil>: Invalid value: \"\": \"a\" must validate at least one schema (anyOf)",
            "a: Too long: may not be more than 1 bytes",
            "<nil>: Invalid value: \"\": \"b\" must not validate the schema (not)",
            "c: Invalid value: \"\": c.bad in body is a forbidden property",
        ]
    );
}

#[test]
fn schema_prune_drops_unknown_fields_like_structuralpruning() {
    let schema = Schema::from_json(&crontab_schema());
    let cases: Vec<(Value, Value, Vec<&str>)> = vec![
        (
            json!({"apiVersion": "v", "kind": "K", "metadata": {"name": "x", "odd": 1}, "extra": 1,
                   "spec": {"cronSpec": "c", "unknown": {"deep": 1}}}),
            json!({"apiVersion": "v", "kind": "K", "metadata": {"name": "x", "odd": 1},
                   "spec": {"cronSpec": "c"}}),
            vec!["extra", "spec.unknown"],
        ),
        (
            json!({"spec": {"ports": [{"name": "a", "x": 1}], "labels": {"any": "v"}}}),
            json!({"spec": {"ports": [{"name": "a"}], "labels": {"any": "v"}}}),
            vec!["spec.ports[0].x"],
        ),
        (
            // Unknown fields stay below x-kubernetes-preserve-unknown-fields, declared ones
            // are still pruned.
            json!({"spec": {"free": {"anything": {"x": 1}, "known": {"a": "1", "b": 2}}}}),
            json!({"spec": {"free": {"anything": {"x": 1}, "known": {"a": "1"}}}}),
            vec!["spec.free.known.b"],
        ),
        (
            // An embedded resource keeps its apiVersion, kind and metadata.
            json!({"spec": {"template": {"apiVersion": "v1", "kind": "Pod", "metadata": {"a": 1}, "spec": {}}}}),
            json!({"spec": {"template": {"apiVersion": "v1", "kind": "Pod", "metadata": {"a": 1}, "spec": {}}}}),
            vec![],
        ),
    ];
    for (mut object, want, unknown) in cases {
        let before = object.clone();
        let paths = prune(&mut object, Some(&schema), true);
        assert_eq!(object, want, "{before}");
        assert_eq!(paths, unknown, "{before}");
    }
    // Not a resource root: apiVersion, kind and metadata are pruned too, but (as in kube) a
    // top-level one is not reported.
    let mut nested = json!({"kind": "x", "a": 1});
    let paths = prune(
        &mut nested,
        Some(&Schema::from_json(
            &json!({"type": "object", "properties": {"a": {"type": "integer"}}}),
        )),
        false,
    );
    assert_eq!(nested, json!({"a": 1}));
    assert!(paths.is_empty(), "{paths:?}");
}

#[test]
fn schema_defaults_apply_like_structuraldefaulting() {
    let schema = Schema::from_json(&json!({"type": "object", "properties": {
        "spec": {"type": "object", "default": {}, "properties": {
            "replicas": {"type": "integer", "default": 1},
            "image": {"type": "string"},
            "ratio": {"type": "number", "nullable": true, "default": 0.5},
            "items": {"type": "array", "items": {"type": "object", "properties": {
                "size": {"type": "string", "default": "small"}}}},
            "labels": {"type": "object", "additionalProperties": {"type": "string", "default": "x"}},
        }},
    }}));
    let cases: Vec<(Value, Value)> = vec![
        (json!({}), json!({"spec": {"replicas": 1, "ratio": 0.5}})),
        (
            json!({"spec": {"replicas": 3}}),
            json!({"spec": {"replicas": 3, "ratio": 0.5}}),
        ),
        // A non-nullable null is defaulted; a nullable null stays; a null without a default
        // goes.
        (
            json!({"spec": {"replicas": null, "ratio": null, "image": null}}),
            json!({"spec": {"replicas": 1, "ratio": null}}),
        ),
        (
            json!({"spec": {"items": [{}, {"size": "big"}], "labels": {"a": null, "b": "y"}}}),
            json!({"spec": {"replicas": 1, "ratio": 0.5, "items": [{"size": "small"}, {"size": "big"}],
                            "labels": {"a": "x", "b": "y"}}}),
        ),
    ];
    for (mut object, want) in cases {
        let before = object.clone();
        apply_defaults(&mut object, &schema);
        assert_eq!(object, want, "{before}");
    }
}

#[test]
fn schema_defaults_are_validated_like_kube() {
    let p = "spec.validation.openAPIV3Schema";
    let cases: Vec<(Value, Vec<&str>)> = vec![
        (json!({"type": "object", "properties": {"a": {"type": "integer", "default": 1}}}), vec![]),
        (
            json!({"type": "object", "properties": {"a": {"type": "integer", "default": "x"}}}),
            vec!["spec.validation.openAPIV3Schema.properties[a].default: Invalid value: \"string\":  in body must be of type integer: \"string\""],
        ),
        (
            json!({"type": "object", "properties": {"a": {"type": "object", "default": {"b": 1}, "properties": {"c": {"type": "integer"}}}}}),
            vec!["spec.validation.openAPIV3Schema.properties[a].default: Invalid value: map[string]interface {}{\"b\":1}: must not have unknown fields"],
        ),
        (
            json!({"type": "object", "properties": {"a": {"type": "integer", "maximum": 3, "default": 5}}}),
            vec!["spec.validation.openAPIV3Schema.properties[a].default: Invalid value: 5:  in body should be less than or equal to 3"],
        ),
        // A default must pass the node's CEL rules too, as a value set where there was none.
        (
            json!({"type": "object", "properties": {"a": {"type": "string", "default": "abc",
                "x-kubernetes-validations": [{"rule": "self.size() < 2"}]}}}),
            vec!["spec.validation.openAPIV3Schema.properties[a].default: Invalid value: \"string\": failed rule: self.size() < 2"],
        ),
        // A `metadata` property of a node that is no resource is not narrowed for its rules.
        (
            json!({"type": "object", "properties": {"template": {"type": "object",
                "default": {"metadata": {"labels": {"a": "b"}}},
                "properties": {"metadata": {"type": "object", "properties": {
                    "labels": {"type": "object", "additionalProperties": {"type": "string"}}}}},
                "x-kubernetes-validations": [{"rule": "has(self.metadata.labels)"}]}}}),
            vec![],
        ),
        (
            json!({"type": "object", "properties": {"a": {"type": "string", "default": "abc",
                "x-kubernetes-validations": [{"rule": "oldSelf.hasValue()", "optionalOldSelf": true,
                                               "message": "no old value"}]}}}),
            vec!["spec.validation.openAPIV3Schema.properties[a].default: Invalid value: \"string\": no old value"],
        ),
    ];
    for (schema, want) in cases {
        let got = validate_defaults(p, &Schema::from_json(&schema), true);
        assert_eq!(rendered(&got), want, "{schema}");
    }
}

#[test]
fn schema_go_float_prints_like_go() {
    for (f, want) in [
        (10.0, "10"),
        (0.5, "0.5"),
        (1e21, "1e+21"),
        (1e-5, "1e-05"),
        (123456.75, "123456.75"),
    ] {
        assert_eq!(go_float(f), want);
    }
}

/// Embedded resources as a property, as array items, as map values, and one declaring its
/// own fields.
fn embedded_schema() -> Value {
    let open = json!({"type": "object", "x-kubernetes-embedded-resource": true,
                      "x-kubernetes-preserve-unknown-fields": true});
    json!({
        "type": "object",
        "properties": {
            "spec": {
                "type": "object",
                "properties": {
                    "template": open,
                    "templates": {"type": "array", "items": open},
                    "byName": {"type": "object", "additionalProperties": open},
                    "typed": {"type": "object", "x-kubernetes-embedded-resource": true,
                              "properties": {
                                  "apiVersion": {"type": "string"},
                                  "kind": {"type": "string"},
                                  "metadata": {"type": "object"},
                                  "spec": {"type": "object", "properties": {"size": {"type": "integer"}}},
                              }},
                },
            },
        },
    })
}

#[test]
fn embedded_resources_are_validated_like_kube() {
    let schema = Schema::from_json(&embedded_schema());
    let pod =
        json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "labels": {"a": "b"}}});
    let good = json!({"spec": {"template": pod, "templates": [pod, pod], "byName": {"x": pod},
                               "typed": {"apiVersion": "apps/v1", "kind": "Deployment", "spec": {"size": 1}}}});
    assert_eq!(rendered(&validate(&schema, &good)), Vec::<String>::new());

    let cases: Vec<(Value, Vec<&str>)> = vec![
        (json!({"template": {}}), vec![
            "spec.template.apiVersion: Required value: must not be empty",
            "spec.template.kind: Required value: must not be empty",
        ]),
        (json!({"templates": [pod, {"kind": "Pod"}]}), vec![
            "spec.templates[1].apiVersion: Required value: must not be empty",
        ]),
        (json!({"byName": {"x": {"apiVersion": "v1"}}}), vec![
            "spec.byName[x].kind: Required value: must not be empty",
        ]),
        (json!({"template": {"apiVersion": "", "kind": ""}}), vec![
            "spec.template.apiVersion: Invalid value: \"\": must not be empty",
            "spec.template.kind: Invalid value: \"\": must not be empty",
        ]),
        (json!({"template": {"apiVersion": "a/b/c", "kind": "Pod"}}), vec![
            "spec.template.apiVersion: Invalid value: \"a/b/c\": unexpected GroupVersion string: a/b/c",
        ]),
        (json!({"template": {"apiVersion": "v1", "kind": "My_Kind"}}), vec![
            "spec.template.kind: Invalid value: \"My_Kind\": may have mixed case, but should otherwise match: a DNS-1035 label must consist of lower case alphanumeric characters or '-', start with an alphabetic character, and end with an alphanumeric character (e.g. 'my-name',  or 'abc-123', regex used for validation is '[a-z]([-a-z0-9]*[a-z0-9])?')",
        ]),
        (json!({"template": {"apiVersion": 1, "kind": null}}), vec![
            "spec.template.apiVersion: Invalid value: 1: must be a string",
            "spec.template.kind: Invalid value: \"null\": must be a string",
        ]),
        // Metadata is ObjectMeta: names are path segments, a namespace is checked when set,
        // labels, annotations, owner references and managed fields as on any object.
        (json!({"template": {"apiVersion": "v1", "kind": "Pod", "metadata": {
            "name": "a/b", "generateName": "x%", "namespace": "Not_A_Label",
            "labels": {"bad key": "v", "k": "bad value"}, "annotations": {"@": "x"},
            "ownerReferences": [{"apiVersion": "v1", "kind": "Event", "name": "e", "uid": "u"}],
            "managedFields": [{"manager": "m", "operation": "Patch", "fieldsType": "FieldsV2"}],
        }}}), vec![
            "spec.template.metadata.generateName: Invalid value: \"x%\": may not contain '%'",
            "spec.template.metadata.name: Invalid value: \"a/b\": may not contain '/'",
            "spec.template.metadata.namespace: Invalid value: \"Not_A_Label\": a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')",
            "spec.template.metadata.labels: Invalid value: \"bad key\": name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')",
            "spec.template.metadata.labels: Invalid value: \"bad value\": a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyValue',  or 'my_value',  or '12345', regex used for validation is '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')",
            "spec.template.metadata.annotations: Invalid value: \"@\": name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')",
            "spec.template.metadata.ownerReferences: Invalid value: {\"apiVersion\":\"v1\",\"kind\":\"Event\",\"name\":\"e\",\"uid\":\"u\"}: /v1, Kind=Event is disallowed from being an owner",
            "spec.template.metadata.managedFields[0].operation: Invalid value: \"Patch\": must be `Apply` or `Update`",
            "spec.template.metadata.managedFields[0].fieldsType: Invalid value: \"FieldsV2\": must be `FieldsV1`",
        ]),
        // Metadata that does not decode is reported whole, with Go's decoding error.
        (json!({"typed": {"apiVersion": "v1", "kind": "Pod", "metadata": {"labels": {"a": 1}}}}), vec![
            "spec.typed.metadata: Invalid value: map[string]interface {}{\"labels\":map[string]interface {}{\"a\":1}}: json: cannot unmarshal number into Go struct field ObjectMeta.labels of type string",
        ]),
    ];
    for (spec, want) in cases {
        let object = json!({"spec": spec});
        assert_eq!(rendered(&validate(&schema, &object)), want, "{spec}");
    }
    let required = validate(&schema, &json!({"spec": {"template": {"kind": "Pod"}}}));
    assert_eq!(required[0].reason, "FieldValueRequired");
    assert_eq!(required[0].field, "spec.template.apiVersion");
}

#[test]
fn embedded_resources_decode_like_kubes_coercer() {
    let schema = Schema::from_json(&embedded_schema());
    // (spec, spec after decode, unknown fields reported)
    let cases: Vec<(Value, Value, Vec<&str>)> = vec![
        (
            json!({"template": {"apiVersion": "v1", "kind": "Pod", "extra": 1,
                                "metadata": {"name": "p", "labels": {}, "foo": {"bar": 1},
                                             "creationTimestamp": null}}}),
            json!({"template": {"apiVersion": "v1", "kind": "Pod", "extra": 1,
                                "metadata": {"name": "p"}}}),
            vec!["spec.template.metadata.foo"],
        ),
        (
            json!({"templates": [{"metadata": {"a": 1}}, {"metadata": {"ownerReferences": [{"name": "o", "b": 2}]}}],
                   "byName": {"k": {"metadata": {"c": 3}}}}),
            json!({"templates": [{"metadata": {}}, {"metadata": {"ownerReferences": [
                       {"apiVersion": "", "kind": "", "name": "o", "uid": ""}]}}],
                   "byName": {"k": {"metadata": {}}}}),
            vec![
                "spec.byName[k].metadata.c",
                "spec.templates[0].metadata.a",
                "spec.templates[1].metadata.ownerReferences[0].b",
            ],
        ),
        (
            // Fields the embedded schema does not declare are pruned as usual; its metadata
            // only by the coercion.
            json!({"typed": {"apiVersion": "v1", "kind": "Pod", "status": 1,
                             "metadata": {"name": "n", "x": 1}, "spec": {"size": 1, "y": 2}}}),
            json!({"typed": {"apiVersion": "v1", "kind": "Pod",
                             "metadata": {"name": "n"}, "spec": {"size": 1}}}),
            vec![
                "spec.typed.spec.y",
                "spec.typed.status",
                "spec.typed.metadata.x",
            ],
        ),
    ];
    for (spec, want, unknown) in cases {
        let mut object = json!({"spec": spec});
        let paths = decode_request(&mut object, &schema).unwrap_or_else(|e| panic!("{spec}: {e}"));
        assert_eq!(object, json!({"spec": want}), "{spec}");
        assert_eq!(paths, unknown, "{spec}");
    }

    let errors: Vec<(Value, &str)> = vec![
        (json!({"template": {"kind": 5}}), "spec.template.kind: Invalid value: 5: must be a string"),
        (json!({"templates": [{"apiVersion": true}]}), "spec.templates[0].apiVersion: Invalid value: true: must be a string"),
        (
            json!({"byName": {"k": {"metadata": "m"}}}),
            "spec.byName[k].metadata: Invalid value: \"m\": json: cannot unmarshal string into Go value of type v1.ObjectMeta",
        ),
        (
            json!({"template": {"metadata": {"name": ["a"]}}}),
            "spec.template.metadata: Invalid value: map[string]interface {}{\"name\":[]interface {}{\"a\"}}: json: cannot unmarshal array into Go struct field ObjectMeta.name of type string",
        ),
        // A declared, non-nullable `kind: null` is dropped before the coercion looks.
        (json!({"template": {"kind": null}}), "spec.template.kind: Invalid value: \"null\": must be a string"),
    ];
    for (spec, want) in errors {
        let mut object = json!({"spec": spec});
        assert_eq!(
            decode_request(&mut object, &schema),
            Err(want.to_string()),
            "{spec}"
        );
    }
    let mut declared_null = json!({"spec": {"typed": {"apiVersion": "v1", "kind": null}}});
    assert_eq!(decode_request(&mut declared_null, &schema), Ok(vec![]));
    assert_eq!(
        declared_null,
        json!({"spec": {"typed": {"apiVersion": "v1"}}})
    );

    // Stored objects are coerced dropping what does not decode.
    let mut stored = json!({"spec": {"template": {"apiVersion": 1, "kind": "Pod",
                                                  "metadata": {"name": "n", "labels": {"a": 1}, "z": 1}}}});
    assert_eq!(
        coerce_embedded(&mut stored, &schema),
        ["spec.template.metadata.z"]
    );
    assert_eq!(
        stored,
        json!({"spec": {"template": {"kind": "Pod", "metadata": {"name": "n"}}}})
    );
}
