use serde_json::json;

use super::v2_to_v3;

/// The shape a k8s.io/apiserver-based backend (the wardle sample) publishes as Swagger 2.0.
fn wardle_v2() -> serde_json::Value {
    json!({
        "swagger": "2.0",
        "info": {"title": "Wardle", "version": "v0.1.0"},
        "host": "wardle.example", "basePath": "/", "schemes": ["https"],
        "consumes": ["application/json"], "produces": ["application/json"],
        "security": [{"BearerToken": []}],
        "paths": {
            "/apis/wardle.example.com/v1alpha1/namespaces/{namespace}/flunders": {
                "get": {
                    "description": "list or watch objects of kind Flunder",
                    "consumes": ["*/*"],
                    "produces": ["application/json", "application/yaml"],
                    "schemes": ["https"],
                    "tags": ["wardleExample_v1alpha1"],
                    "operationId": "listWardleExampleV1alpha1NamespacedFlunder",
                    "parameters": [
                        {"uniqueItems": true, "type": "string", "description": "selector", "name": "labelSelector", "in": "query"},
                        {"$ref": "#/parameters/limit-1NfNmdNH"}
                    ],
                    "responses": {
                        "200": {"description": "OK", "schema": {"$ref": "#/definitions/com.example.wardle.v1alpha1.FlunderList"}},
                        "401": {"description": "Unauthorized"}
                    },
                    "x-kubernetes-action": "list",
                    "x-kubernetes-group-version-kind": {"group": "wardle.example.com", "kind": "Flunder", "version": "v1alpha1"}
                },
                "post": {
                    "consumes": ["application/json", "application/yaml"],
                    "produces": ["application/json"],
                    "operationId": "createWardleExampleV1alpha1NamespacedFlunder",
                    "parameters": [
                        {"name": "body", "in": "body", "required": true, "schema": {"$ref": "#/definitions/com.example.wardle.v1alpha1.Flunder"}}
                    ],
                    "responses": {"201": {"description": "Created", "schema": {"$ref": "#/definitions/com.example.wardle.v1alpha1.Flunder"}}}
                },
                "put": {
                    "parameters": [{"name": "body", "in": "body", "schema": {"type": "object"}}],
                    "responses": {"200": {"description": "OK", "schema": {"type": "object"}}}
                },
                "delete": {
                    "consumes": ["application/json"],
                    "produces": ["application/json"],
                    "parameters": [{"$ref": "#/parameters/body-2Y1dVQaQ"}],
                    "responses": {"200": {"$ref": "#/responses/ok"}}
                },
                "parameters": [
                    {"uniqueItems": true, "type": "string", "description": "object name and auth scope", "name": "namespace", "in": "path", "required": true}
                ]
            }
        },
        "parameters": {
            "limit-1NfNmdNH": {"uniqueItems": true, "type": "integer", "description": "limit", "name": "limit", "in": "query"},
            "body-2Y1dVQaQ": {"name": "body", "in": "body", "schema": {"$ref": "#/definitions/io.k8s.apimachinery.pkg.apis.meta.v1.DeleteOptions"}}
        },
        "responses": {"ok": {"description": "OK", "schema": {"type": "object"}}},
        "definitions": {
            "com.example.wardle.v1alpha1.Flunder": {
                "type": "object",
                "properties": {
                    "metadata": {"description": "Standard object's metadata.", "$ref": "#/definitions/io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta"},
                    "spec": {"$ref": "#/definitions/com.example.wardle.v1alpha1.FlunderSpec"},
                    "tags": {"type": "array", "items": {"$ref": "#/definitions/com.example.wardle.v1alpha1.Tag"}},
                    "labels": {"type": "object", "additionalProperties": {"$ref": "#/definitions/com.example.wardle.v1alpha1.Tag"}},
                    "either": {"oneOf": [{"$ref": "#/definitions/com.example.wardle.v1alpha1.Tag"}]},
                    "both": {"$ref": "#/definitions/com.example.wardle.v1alpha1.Tag", "allOf": [{"required": ["name"]}]}
                },
                "x-kubernetes-group-version-kind": [{"group": "wardle.example.com", "kind": "Flunder", "version": "v1alpha1"}]
            }
        },
        "securityDefinitions": {
            "BearerToken": {"description": "Bearer Token authentication", "type": "apiKey", "name": "authorization", "in": "header"},
            "oauth": {"type": "oauth2", "flow": "accessCode", "authorizationUrl": "https://a", "tokenUrl": "https://t", "scopes": {"read": "r"}}
        }
    })
}

#[test]
fn top_level_is_openapi_3_with_components() {
    let v3 = v2_to_v3(&wardle_v2());
    assert_eq!(v3["openapi"], "3.0.0");
    assert_eq!(v3["info"], json!({"title": "Wardle", "version": "v0.1.0"}));
    for dropped in [
        "swagger",
        "host",
        "basePath",
        "schemes",
        "consumes",
        "produces",
        "security",
        "definitions",
        "parameters",
        "responses",
        "securityDefinitions",
    ] {
        assert!(v3.get(dropped).is_none(), "{dropped}");
    }
    assert_eq!(
        v3["components"]["securitySchemes"]["BearerToken"],
        json!({"description": "Bearer Token authentication", "type": "apiKey", "name": "authorization", "in": "header"})
    );
    assert_eq!(
        v3["components"]["securitySchemes"]["oauth"],
        json!({"type": "oauth2", "flows": {"accessCode": {"authorizationUrl": "https://a", "tokenUrl": "https://t", "scopes": {"read": "r"}}}})
    );
    // Shared responses get the document's produces.
    assert_eq!(
        v3["components"]["responses"]["ok"],
        json!({"description": "OK", "content": {"application/json": {"schema": {"type": "object"}}}})
    );
    // An empty document still has components, as kube's converter gives.
    assert_eq!(
        v2_to_v3(&json!({"swagger": "2.0"})),
        json!({"openapi": "3.0.0", "components": {}})
    );
}

#[test]
fn schemas_move_to_components_with_references_rewritten_and_wrapped() {
    let v3 = v2_to_v3(&wardle_v2());
    let flunder = &v3["components"]["schemas"]["com.example.wardle.v1alpha1.Flunder"];
    let props = &flunder["properties"];
    // A reference with siblings is wrapped in allOf (3.0 ignores a $ref's siblings).
    assert_eq!(
        props["metadata"],
        json!({"description": "Standard object's metadata.", "allOf": [{"$ref": "#/components/schemas/io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta"}]})
    );
    assert_eq!(
        props["spec"],
        json!({"$ref": "#/components/schemas/com.example.wardle.v1alpha1.FlunderSpec"})
    );
    assert_eq!(
        props["tags"]["items"]["$ref"],
        "#/components/schemas/com.example.wardle.v1alpha1.Tag"
    );
    assert_eq!(
        props["labels"]["additionalProperties"]["$ref"],
        "#/components/schemas/com.example.wardle.v1alpha1.Tag"
    );
    assert_eq!(
        props["either"]["oneOf"][0]["$ref"],
        "#/components/schemas/com.example.wardle.v1alpha1.Tag"
    );
    // kubectl explain finds the kind through this extension.
    assert_eq!(
        flunder["x-kubernetes-group-version-kind"][0]["kind"],
        "Flunder"
    );
    assert!(!v3.to_string().contains("#/definitions/"));
}

#[test]
fn operations_get_request_bodies_parameters_with_schemas_and_response_content() {
    let v3 = v2_to_v3(&wardle_v2());
    let item = &v3["paths"]["/apis/wardle.example.com/v1alpha1/namespaces/{namespace}/flunders"];
    let list = &item["get"];
    assert_eq!(
        list["operationId"],
        "listWardleExampleV1alpha1NamespacedFlunder"
    );
    assert_eq!(list["x-kubernetes-action"], "list");
    assert!(
        list.get("consumes").is_none()
            && list.get("produces").is_none()
            && list.get("schemes").is_none()
    );
    assert_eq!(
        list["parameters"],
        json!([
            {"name": "labelSelector", "in": "query", "description": "selector", "schema": {"type": "string", "uniqueItems": true}},
            // A shared parameter is inlined (kube leaves a dangling #/components/parameters ref).
            {"name": "limit", "in": "query", "description": "limit", "schema": {"type": "integer", "uniqueItems": true}}
        ])
    );
    let flunder_list =
        json!({"schema": {"$ref": "#/components/schemas/com.example.wardle.v1alpha1.FlunderList"}});
    assert_eq!(
        list["responses"]["200"],
        json!({"description": "OK", "content": {"application/json": flunder_list, "application/yaml": flunder_list}})
    );
    assert_eq!(
        list["responses"]["401"],
        json!({"description": "Unauthorized"})
    );

    let create = &item["post"];
    assert!(create.get("parameters").is_none());
    let flunder =
        json!({"schema": {"$ref": "#/components/schemas/com.example.wardle.v1alpha1.Flunder"}});
    assert_eq!(
        create["requestBody"],
        json!({"content": {"application/json": flunder, "application/yaml": flunder}})
    );

    // Without its own consumes and produces, an operation uses the document's.
    let replace = &item["put"];
    assert_eq!(
        replace["requestBody"],
        json!({"content": {"application/json": {"schema": {"type": "object"}}}})
    );
    assert_eq!(
        replace["responses"]["200"],
        json!({"description": "OK", "content": {"application/json": {"schema": {"type": "object"}}}})
    );

    // A shared body parameter becomes the request body too; a response reference moves.
    let delete = &item["delete"];
    assert_eq!(
        delete["requestBody"]["content"]["application/json"]["schema"]["$ref"],
        "#/components/schemas/io.k8s.apimachinery.pkg.apis.meta.v1.DeleteOptions"
    );
    assert_eq!(
        delete["responses"]["200"],
        json!({"$ref": "#/components/responses/ok"})
    );

    assert_eq!(
        item["parameters"],
        json!([{"name": "namespace", "in": "path", "required": true, "description": "object name and auth scope", "schema": {"type": "string", "uniqueItems": true}}])
    );
}
