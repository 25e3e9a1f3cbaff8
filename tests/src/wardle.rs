//! A sample extension API server for the aggregation end-to-end tests: [`Wardle`] serves
//! `wardle.example.com/v1alpha1` (namespaced `flunders`, cluster-scoped `fischers`) the way an
//! extension server built on `k8s.io/apiserver` does (kube's sample-apiserver), so kubegate's
//! APIService proxying can be driven with the real kubectl:
//!
//! - TLS 1.2+ with a serving certificate from a fresh CA ([`Wardle::ca_pem`],
//!   [`Wardle::ca_bundle_base64`] for the APIService `caBundle`);
//! - front-proxy authentication as `k8s.io/apiserver`'s request-header authenticator: a client
//!   certificate verified against the front-proxy CA with an allowed common name, plus
//!   `X-Remote-User`, `X-Remote-Uid`, `X-Remote-Group`, `X-Remote-Extra-<key>`; anything else
//!   is a 401 `Status` (health paths are open);
//! - legacy and aggregated (`apidiscovery.k8s.io/v2`, `v2beta1`) discovery, OpenAPI v2 and v3;
//! - in-memory resources with resourceVersions, get/list/create/update/patch/delete/
//!   deletecollection, watch (chunked JSON lines), Table output for `kubectl get`;
//! - an `/exec` upgrade endpoint for the CVE-2018-1002105 regression test: `upgrade-ok` is
//!   switched and echoed, any other name is refused with a 400 on a connection that stays open;
//! - a request log of everything received ([`Wardle::requests`], also `GET /_requests`): the
//!   header names, the values of identity headers and `X-Forwarded-For`, and the `Host`;
//! - a flunder named [`DROP_WHEN_REUSED`] whose GET, unless it is its connection's first
//!   request, closes the connection unanswered (logged with code 0): a kept-alive connection
//!   the server drops just as it is reused; one named [`CHUNKED_ANSWER`] whose GET is
//!   answered chunked with hop-by-hop response headers; one named [`SLOW_ANSWER`] whose GET
//!   takes [`SLOW_SECONDS`] (as does the group-version's resource list asked with `?slow=1`); one named [`UNASKED_SWITCH`] whose GET is answered `101` unasked;
//!   one named [`REDIRECT_ANSWER`] whose GET, PUT and exec upgrade are redirected elsewhere;
//!   [`INFORMATIONAL_ANSWER`] and [`ENDLESS_INFORMATIONAL`], whose GETs get `103` informational
//!   answers first (two, then the object; eight, then nothing).
//!
//! Like the fixtures in [`crate::fixtures`], the server is a python3 `http.server` child
//! process (one thread per connection, HTTP/1.1 keep-alive) that binds its loopback port itself
//! and reports it, with certificates made by the `openssl` CLI in a temporary directory; it is
//! killed by pid when stopped or dropped. [`make_front_proxy_ca`] makes a front-proxy CA and
//! its `front-proxy-client` certificate for tests that talk to the fixture directly.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use serde_json::{json, Value};

use crate::openssl::{issue, make_ca, write, CLIENT_EXTENSIONS};

/// The python server. Argument: the state dir, holding `config.json` (written by
/// [`Wardle::start`]), where it keeps `store.json` (objects, so a restart keeps them) and
/// appends `requests.jsonl`. Prints the port it bound, then serves until killed.
const SERVER_PY: &str = r##"
import bisect, copy, hashlib, http.server, json, os, random, re, select, socket, ssl, sys
import threading, time, traceback, urllib.parse, uuid

STATE = sys.argv[1]


def state_file(name):
    return os.path.join(STATE, name)


with open(state_file("config.json")) as f:
    CONFIG = json.load(f)

GROUP, VERSION = "wardle.example.com", "v1alpha1"
GV = GROUP + "/" + VERSION
PREFIX = "/apis/" + GV
VERBS = ["create", "delete", "deletecollection", "get", "list", "patch", "update", "watch"]
RESOURCES = {
    "fischers": {"kind": "Fischer", "singular": "fischer", "namespaced": False},
    "flunders": {"kind": "Flunder", "singular": "flunder", "namespaced": True},
}
NAME_RE = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
HEALTH = ("/healthz", "/livez", "/readyz")
JSON = "application/json"
AGGREGATED_TYPE = "application/json;g=apidiscovery.k8s.io;v=%s;as=APIGroupDiscoveryList"


def dumps(value):
    return json.dumps(value, separators=(",", ":")).encode()


def now():
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


def status(code, reason, message, details=None):
    body = {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
            "message": message, "reason": reason}
    if details is not None:
        body["details"] = details
    body["code"] = code
    return body


def not_found(resource, name):
    return status(404, "NotFound", '%s.%s "%s" not found' % (resource, GROUP, name),
                  {"name": name, "group": GROUP, "kind": resource})


PATH_NOT_FOUND = status(404, "NotFound", "the server could not find the requested resource", {})


def bad_request(message):
    return status(400, "BadRequest", message)


def invalid(resource, name, field, message):
    kind = RESOURCES[resource]["kind"]
    return status(422, "Invalid", '%s.%s "%s" is invalid: %s: %s' % (kind, GROUP, name, field, message),
                  {"name": name, "group": GROUP, "kind": kind,
                   "causes": [{"reason": "FieldValueInvalid", "message": message, "field": field}]})


def conflict(resource, name):
    return status(409, "Conflict",
                  'Operation cannot be fulfilled on %s.%s "%s": the object has been modified; '
                  "please apply your changes to the latest version and try again" % (resource, GROUP, name),
                  {"name": name, "group": GROUP, "kind": resource})


# ---- storage: objects by (resource, namespace or "", name), a global revision, and every
# change since this process started (watches resume from it). Stored objects are never
# mutated once committed, so they can be serialized outside the lock.

cond = threading.Condition()
store = {}
events = []
event_rvs = []
revision = 0
if os.path.exists(state_file("store.json")):
    with open(state_file("store.json")) as f:
        saved = json.load(f)
    revision = saved["revision"]
    for resource, namespace, name, obj in saved["objects"]:
        store[(resource, namespace, name)] = obj
# Watches from before a restart cannot be resumed: their events are gone (410 Expired).
HISTORY_START = revision


def persist():
    tmp = state_file("store.json.tmp")
    with open(tmp, "w") as f:
        json.dump({"revision": revision,
                   "objects": [[r, ns, n, o] for (r, ns, n), o in sorted(store.items())]}, f)
    os.replace(tmp, state_file("store.json"))


def commit(event_type, key, obj):
    """Stores (or deletes) obj under a new revision and wakes the watches. Holds cond."""
    global revision
    revision += 1
    obj["metadata"]["resourceVersion"] = str(revision)
    if event_type == "DELETED":
        store.pop(key, None)
    else:
        store[key] = obj
    events.append({"rv": revision, "resource": key[0], "namespace": key[1], "type": event_type,
                   "object": obj})
    event_rvs.append(revision)
    persist()
    cond.notify_all()
    return obj


# ---- request log

log_lock = threading.Lock()


def append_log(entry):
    line = json.dumps(entry) + "\n"
    with log_lock:
        with open(state_file("requests.jsonl"), "a") as f:
            f.write(line)


def read_log():
    with log_lock:
        try:
            with open(state_file("requests.jsonl")) as f:
                text = f.read()
        except FileNotFoundError:
            text = ""
    out = []
    for line in text.splitlines():
        try:
            out.append(json.loads(line))
        except ValueError:
            pass
    return out


# ---- selectors (equality-based labels; metadata.name / metadata.namespace fields)

class BadSelector(Exception):
    pass


def split_requirement(part, ops):
    for op in ops:
        if op in part:
            key, value = part.split(op, 1)
            return ("=" if op == "==" else op), key.strip(), value.strip()
    return None


def parse_labels(text):
    if "(" in (text or ""):
        raise BadSelector("the wardle fixture supports only equality-based label selectors: %s" % text)
    reqs = []
    for part in (text or "").split(","):
        part = part.strip()
        if not part:
            continue
        req = split_requirement(part, ("!=", "==", "="))
        if req is None:
            req = ("!", part[1:].strip(), None) if part.startswith("!") else ("exists", part, None)
        reqs.append(req)
    return reqs


def parse_fields(text):
    reqs = []
    for part in (text or "").split(","):
        part = part.strip()
        if not part:
            continue
        req = split_requirement(part, ("!=", "==", "="))
        if req is None:
            raise BadSelector("invalid field selector: %s" % part)
        if req[1] not in ("metadata.name", "metadata.namespace"):
            raise BadSelector('field label not supported: %s' % req[1])
        reqs.append((req[0], req[1].split(".", 1)[1], req[2]))
    return reqs


class Selection:
    def __init__(self, resource, namespace, labels, fields):
        self.resource, self.namespace = resource, namespace
        self.labels, self.fields = labels, fields

    def matches(self, resource, namespace, obj):
        if resource != self.resource or (self.namespace is not None and namespace != self.namespace):
            return False
        meta = obj.get("metadata") or {}
        labels = meta.get("labels") or {}
        for op, key, value in self.labels:
            if op == "=" and labels.get(key) != value:
                return False
            if op == "!=" and labels.get(key) == value:
                return False
            if op == "!" and key in labels:
                return False
            if op == "exists" and key not in labels:
                return False
        for op, field, value in self.fields:
            if (meta.get(field, "") == value) != (op == "="):
                return False
        return True

    def current(self):
        """Matching stored objects, by namespace and name. Holds cond."""
        return [o for (r, ns, _), o in sorted(store.items()) if self.matches(r, ns, o)]


# ---- patches

class PatchError(Exception):
    pass


def merge_patch(target, patch):
    """RFC 7386 JSON merge patch."""
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    out = dict(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            out.pop(key, None)
        else:
            out[key] = merge_patch(out.get(key), value)
    return out


def strip_directives(value):
    if isinstance(value, dict):
        return {k: strip_directives(v) for k, v in value.items() if not k.startswith("$")}
    if isinstance(value, list):
        return [strip_directives(v) for v in value]
    return value


def strategic_merge_patch(target, patch):
    """A strategic merge patch without merge keys (the fixture's types have no merge lists):
    a merge patch that honours `$patch: replace|delete` on maps and drops other directives
    (`$setElementOrder/...`, `$retainKeys`, `$deleteFromPrimitiveList/...`)."""
    if not isinstance(patch, dict):
        return strip_directives(copy.deepcopy(patch))
    directive = patch.get("$patch")
    if directive == "delete":
        return None
    out = dict(target) if isinstance(target, dict) and directive != "replace" else {}
    for key, value in patch.items():
        if key.startswith("$"):
            continue
        merged = None if value is None else strategic_merge_patch(out.get(key), value)
        if merged is None:
            out.pop(key, None)
        else:
            out[key] = merged
    return out


def pointer(path):
    if path == "":
        return []
    if not isinstance(path, str) or not path.startswith("/"):
        raise PatchError("invalid JSON pointer %r" % (path,))
    return [p.replace("~1", "/").replace("~0", "~") for p in path[1:].split("/")]


def pointer_parent(doc, parts):
    node = doc
    for part in parts[:-1]:
        if isinstance(node, dict) and part in node:
            node = node[part]
        elif isinstance(node, list) and part.isdigit() and int(part) < len(node):
            node = node[int(part)]
        else:
            raise PatchError("doc is missing path: /%s" % "/".join(parts))
    return node


def pointer_get(doc, parts):
    if not parts:
        return doc
    parent, last = pointer_parent(doc, parts), parts[-1]
    if isinstance(parent, dict) and last in parent:
        return parent[last]
    if isinstance(parent, list) and last.isdigit() and int(last) < len(parent):
        return parent[int(last)]
    raise PatchError("doc is missing path: /%s" % "/".join(parts))


def pointer_remove(doc, parts):
    pointer_get(doc, parts)
    parent, last = pointer_parent(doc, parts), parts[-1]
    if isinstance(parent, dict):
        del parent[last]
    else:
        del parent[int(last)]


def pointer_add(doc, parts, value):
    if not parts:
        return value
    parent, last = pointer_parent(doc, parts), parts[-1]
    if isinstance(parent, dict):
        parent[last] = value
    elif isinstance(parent, list) and (last == "-" or (last.isdigit() and int(last) <= len(parent))):
        parent.insert(len(parent) if last == "-" else int(last), value)
    else:
        raise PatchError("doc is missing path: /%s" % "/".join(parts))
    return doc


def json_patch(doc, ops):
    """RFC 6902 JSON patch."""
    doc = copy.deepcopy(doc)
    for op in ops:
        if not isinstance(op, dict):
            raise PatchError("invalid JSON patch operation %r" % (op,))
        kind, path = op.get("op"), pointer(op.get("path", ""))
        if kind == "add":
            doc = pointer_add(doc, path, copy.deepcopy(op.get("value")))
        elif kind == "remove":
            pointer_remove(doc, path)
        elif kind == "replace":
            pointer_remove(doc, path)
            doc = pointer_add(doc, path, copy.deepcopy(op.get("value")))
        elif kind == "move":
            source = pointer(op.get("from", ""))
            value = pointer_get(doc, source)
            pointer_remove(doc, source)
            doc = pointer_add(doc, path, value)
        elif kind == "copy":
            doc = pointer_add(doc, path, copy.deepcopy(pointer_get(doc, pointer(op.get("from", "")))))
        elif kind == "test":
            if pointer_get(doc, path) != op.get("value"):
                raise PatchError("testing value %s failed" % op.get("path"))
        else:
            raise PatchError("unexpected kind of JSON patch operation: %r" % (kind,))
    return doc


# ---- tables (kube's default table convertor: Name and Created At)

COLUMNS = [
    {"name": "Name", "type": "string", "format": "name",
     "description": "Name must be unique within a namespace. Is required when creating resources, "
     "although some resources may allow a client to request the generation of an appropriate name "
     "automatically. Name is primarily intended for creation idempotence and configuration "
     "definition. Cannot be updated. More info: "
     "https://kubernetes.io/docs/concepts/overview/working-with-objects/names#names",
     "priority": 0},
    {"name": "Created At", "type": "date", "format": "",
     "description": "CreationTimestamp is a timestamp representing the server time when this "
     "object was created. It is not guaranteed to be set in happens-before order across separate "
     "operations. Clients may not set this value. It is represented in RFC3339 form and is in "
     "UTC.\n\nPopulated by the system. Read-only. Null for lists. More info: "
     "https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#metadata",
     "priority": 0},
]


def partial(obj, version):
    return {"kind": "PartialObjectMetadata", "apiVersion": "meta.k8s.io/" + version,
            "metadata": obj["metadata"]}


def table(objs, version, include, headers=True, rv=None):
    rows = []
    for obj in objs:
        meta = obj["metadata"]
        row = {"cells": [meta.get("name"), meta.get("creationTimestamp")]}
        if include == "Object":
            row["object"] = obj
        elif include != "None":
            row["object"] = partial(obj, version)
        rows.append(row)
    out = {"kind": "Table", "apiVersion": "meta.k8s.io/" + version, "metadata": {},
           "columnDefinitions": COLUMNS if headers else None, "rows": rows}
    if rv:
        out["metadata"]["resourceVersion"] = rv
    return out


# ---- discovery

def gv_entry():
    return {"groupVersion": GV, "version": VERSION}


GROUP_LIST = dumps({"kind": "APIGroupList", "apiVersion": "v1", "groups": [
    {"name": GROUP, "versions": [gv_entry()], "preferredVersion": gv_entry()}]})
API_GROUP = dumps({"kind": "APIGroup", "apiVersion": "v1", "name": GROUP, "versions": [gv_entry()],
                   "preferredVersion": gv_entry()})
RESOURCE_LIST = dumps({"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": GV, "resources": [
    {"name": r, "singularName": i["singular"], "namespaced": i["namespaced"], "kind": i["kind"],
     "verbs": VERBS} for r, i in sorted(RESOURCES.items())]})


def aggregated(version):
    return dumps({"kind": "APIGroupDiscoveryList", "apiVersion": "apidiscovery.k8s.io/" + version,
                  "metadata": {}, "items": [{
                      "metadata": {"name": GROUP, "creationTimestamp": None},
                      "versions": [{"version": VERSION, "resources": [
                          {"resource": r, "responseKind": {"group": "", "version": "", "kind": i["kind"]},
                           "scope": "Namespaced" if i["namespaced"] else "Cluster",
                           "singularResource": i["singular"], "verbs": VERBS}
                          for r, i in sorted(RESOURCES.items())], "freshness": "Current"}]}]})


AGGREGATED = {"v2": aggregated("v2"), "v2beta1": aggregated("v2beta1")}
VERSION_INFO = dumps({"major": "1", "minor": "32", "gitVersion": "v1.32.0-wardle-fixture",
                      "gitCommit": "", "gitTreeState": "clean", "buildDate": "1970-01-01T00:00:00Z",
                      "goVersion": "python", "compiler": "python", "platform": "linux/amd64"})

# ---- OpenAPI: one builder for v3 (components/schemas, allOf refs) and v2 (definitions)

META = "io.k8s.apimachinery.pkg.apis.meta.v1."
SAMPLE = "com.example.wardle.v1alpha1."
INFO = {"title": "Wardle", "version": "v0.1.0"}
TAG = "wardleExampleCom_v1alpha1"
API_VERSION_DOC = ("APIVersion defines the versioned schema of this representation of an object. "
                   "Servers should convert recognized schemas to the latest internal value, and may "
                   "reject unrecognized values. More info: https://git.k8s.io/community/contributors/"
                   "devel/sig-architecture/api-conventions.md#resources")
KIND_DOC = ("Kind is a string value representing the REST resource this object represents. Servers "
            "may infer this from the endpoint the client submits requests to. Cannot be updated. In "
            "CamelCase. More info: https://git.k8s.io/community/contributors/devel/sig-architecture/"
            "api-conventions.md#types-kinds")


def schemas():
    def ref(name, description):
        return {"description": description, "default": {}, "allOf": [{"$ref": "#/components/schemas/" + name}]}

    def string(description):
        return {"description": description, "type": "string"}

    def string_map(description):
        return {"description": description, "type": "object",
                "additionalProperties": {"type": "string", "default": ""}}

    def gvk(kind):
        return [{"group": GROUP, "kind": kind, "version": VERSION}]

    def type_meta():
        return {"apiVersion": string(API_VERSION_DOC), "kind": string(KIND_DOC)}

    def resource(kind, description, fields):
        props = type_meta()
        props["metadata"] = ref(META + "ObjectMeta", "Standard object's metadata. More info: "
                                "https://git.k8s.io/community/contributors/devel/sig-architecture/"
                                "api-conventions.md#metadata")
        props.update(fields)
        return {"description": description, "type": "object", "properties": props,
                "x-kubernetes-group-version-kind": gvk(kind)}

    def resource_list(kind):
        props = type_meta()
        props["items"] = {"type": "array", "items": {"default": {}, "allOf": [
            {"$ref": "#/components/schemas/" + SAMPLE + kind}]}}
        props["metadata"] = ref(META + "ListMeta", "Standard list metadata.")
        return {"description": "%sList is a list of %s objects." % (kind, kind), "type": "object",
                "required": ["items"], "properties": props,
                "x-kubernetes-group-version-kind": gvk(kind + "List")}

    return {
        SAMPLE + "Fischer": resource("Fischer", "Fischer is a cluster-scoped example type.", {
            "disallowedFlunders": {"description": "DisallowedFlunders holds a list of Flunder.Names "
                                   "that are disallowed.", "type": "array",
                                   "items": {"type": "string", "default": ""}}}),
        SAMPLE + "FischerList": resource_list("Fischer"),
        SAMPLE + "Flunder": resource("Flunder", "Flunder is a namespaced example type.", {
            "spec": ref(SAMPLE + "FlunderSpec", "Spec is the desired state of the flunder."),
            "status": ref(SAMPLE + "FlunderStatus", "Status is the observed state of the flunder."),
        }),
        SAMPLE + "FlunderList": resource_list("Flunder"),
        SAMPLE + "FlunderSpec": {"description": "FlunderSpec is the specification of a Flunder.",
                                 "type": "object", "properties": {
                                     "reference": string("A name of another flunder or fischer, "
                                                         "depending on the reference type."),
                                     "referenceType": string("The reference type, defaults to "
                                                             "\"Flunder\" if reference is set.")}},
        SAMPLE + "FlunderStatus": {"description": "FlunderStatus is the observed state of a Flunder.",
                                   "type": "object"},
        META + "ObjectMeta": {
            "description": "ObjectMeta is metadata that all persisted resources must have.",
            "type": "object", "properties": {
                "annotations": string_map("Annotations is an unstructured key value map stored "
                                          "with a resource."),
                "creationTimestamp": {"description": COLUMNS[1]["description"], "type": "string",
                                      "format": "date-time"},
                "generateName": string("GenerateName is an optional prefix, used by the server, to "
                                       "generate a unique name ONLY IF the Name field has not been "
                                       "provided."),
                "generation": {"description": "A sequence number representing a specific generation "
                               "of the desired state.", "type": "integer", "format": "int64"},
                "labels": string_map("Map of string keys and values that can be used to organize "
                                     "and categorize (scope and select) objects."),
                "name": string(COLUMNS[0]["description"]),
                "namespace": string("Namespace defines the space within which each name must be "
                                    "unique."),
                "resourceVersion": string("An opaque value that represents the internal version of "
                                          "this object."),
                "uid": string("UID is the unique in time and space value for this object."),
            }},
        META + "ListMeta": {"description": "ListMeta describes metadata that synthetic resources must "
                            "have.", "type": "object", "properties": {
                                "continue": string("continue may be set if the user set a limit."),
                                "resourceVersion": string("String that identifies the server's "
                                                          "internal version of this object.")}},
        META + "Status": {"description": "Status is a return value for calls that don't return other "
                          "objects.", "type": "object", "properties": dict(type_meta(), **{
                              "code": {"description": "Suggested HTTP return code for this status.",
                                       "type": "integer", "format": "int32"},
                              "message": string("A human-readable description of the status."),
                              "reason": string("A machine-readable description of why this operation "
                                               "is in the \"Failure\" status."),
                              "status": string("Status of the operation: \"Success\" or "
                                               "\"Failure\".")})},
        META + "DeleteOptions": {"description": "DeleteOptions may be provided when deleting an API "
                                 "object.", "type": "object", "properties": dict(type_meta(), **{
                                     "propagationPolicy": string("Whether and how garbage "
                                                                 "collection will be performed.")})},
        META + "Patch": {"description": "Patch is provided to give a concrete name and type to the "
                         "Kubernetes PATCH request body.", "type": "object"},
        META + "WatchEvent": {"description": "Event represents a single event to a watched resource.",
                              "type": "object", "required": ["type", "object"], "properties": {
                                  "object": {"description": "Object is the object of the event.",
                                             "type": "object"},
                                  "type": {"type": "string", "default": ""}}},
        META + "APIResourceList": {"description": "APIResourceList is a list of APIResource.",
                                   "type": "object"},
    }


def v2_schemas():
    out = {}
    for name, schema in schemas().items():
        out[name] = inline_refs(schema)
    return out


def inline_refs(value):
    if isinstance(value, list):
        return [inline_refs(v) for v in value]
    if not isinstance(value, dict):
        return value
    allof = value.get("allOf") or []
    out = {}
    for key, item in value.items():
        if key == "allOf" and len(allof) == 1 and "$ref" in allof[0]:
            out["$ref"] = allof[0]["$ref"].replace("#/components/schemas/", "#/definitions/")
        elif key == "$ref":
            out["$ref"] = item.replace("#/components/schemas/", "#/definitions/")
        else:
            out[key] = inline_refs(item)
    return out


def paths(v3):
    def schema_ref(name):
        return {"$ref": ("#/components/schemas/" if v3 else "#/definitions/") + name}

    def param(name, where, description, type_="string", required=False):
        p = {"name": name, "in": where, "description": description}
        if required:
            p["required"] = True
        if v3:
            p["schema"] = {"type": type_, "uniqueItems": True}
        else:
            p.update({"type": type_, "uniqueItems": True})
        return p

    def responses(codes, name):
        out = {}
        for code in codes:
            text = {"200": "OK", "201": "Created", "202": "Accepted"}[code]
            if v3:
                out[code] = {"description": text, "content": {
                    t: {"schema": schema_ref(name)} for t in (JSON, "application/yaml")}}
            else:
                out[code] = {"description": text, "schema": schema_ref(name)}
        out["401"] = {"description": "Unauthorized"}
        return out

    def operation(action, op_id, kind, response, codes=("200",), body=None, body_types=("*/*",),
                  params=()):
        op = {"description": "%s %s" % (action, kind), "operationId": op_id, "tags": [TAG],
              "parameters": list(params), "responses": responses(codes, response),
              "x-kubernetes-action": action,
              "x-kubernetes-group-version-kind": {"group": GROUP, "kind": kind, "version": VERSION}}
        if body and v3:
            op["requestBody"] = {"content": {t: {"schema": schema_ref(body)} for t in body_types},
                                 "required": True}
        elif body:
            op["parameters"].append({"name": "body", "in": "body", "required": True,
                                     "schema": schema_ref(body)})
            op["consumes"] = list(body_types)
        if not v3:
            op["produces"] = [JSON, "application/yaml"]
            op["schemes"] = ["https"]
        return op

    pretty = param("pretty", "query", "If 'true', then the output is pretty printed.")
    list_params = [param(n, "query", d) for n, d in (
        ("labelSelector", "A selector to restrict the list of returned objects by their labels."),
        ("fieldSelector", "A selector to restrict the list of returned objects by their fields."),
        ("resourceVersion", "resourceVersion sets a constraint on what resource versions a request "
                            "may be served from."),
        ("resourceVersionMatch", "resourceVersionMatch determines how resourceVersion is applied."),
        ("continue", "The continue option should be set when retrieving more results."))] + [
        param("limit", "query", "limit is a maximum number of responses to return.", "integer"),
        param("timeoutSeconds", "query", "Timeout for the list/watch call.", "integer"),
        param("watch", "query", "Watch for changes to the described resources.", "boolean"),
        param("allowWatchBookmarks", "query", "allowWatchBookmarks requests watch events with type "
                                              "\"BOOKMARK\".", "boolean"),
        param("sendInitialEvents", "query", "`sendInitialEvents=true` may be set together with "
                                            "`watch=true`.", "boolean")]
    write_params = [param("dryRun", "query", "When present, indicates that modifications should not "
                                             "be persisted."),
                    param("fieldManager", "query", "fieldManager is a name associated with the actor "
                                                   "or entity that is making these changes."),
                    param("fieldValidation", "query", "fieldValidation instructs the server on how to "
                                                      "handle objects in the request containing "
                                                      "unknown or duplicate fields.")]
    patch_types = ["application/json-patch+json", "application/merge-patch+json",
                   "application/strategic-merge-patch+json", "application/apply-patch+yaml"]
    name_param = param("name", "path", "name of the resource", required=True)
    ns_param = param("namespace", "path", "object name and auth scope, such as for teams and "
                                          "projects", required=True)
    out = {PREFIX + "/": {"get": {
        "description": "get available resources", "operationId": "getWardleExampleComV1alpha1APIResources",
        "tags": [TAG], "responses": responses(("200",), META + "APIResourceList")}}}
    for resource, info in sorted(RESOURCES.items()):
        kind = info["kind"]
        scoped = "Namespaced" + kind if info["namespaced"] else kind
        ids = "WardleExampleComV1alpha1"
        collection = PREFIX + ("/namespaces/{namespace}/" if info["namespaced"] else "/") + resource
        scope_params = [ns_param] if info["namespaced"] else []
        out[collection] = {
            "get": operation("list", "list" + ids + scoped, kind, SAMPLE + kind + "List",
                             params=list_params),
            "post": operation("post", "create" + ids + scoped, kind, SAMPLE + kind,
                              ("200", "201", "202"), SAMPLE + kind, params=write_params),
            "delete": operation("deletecollection", "delete" + ids + "Collection" + scoped, kind,
                                META + "Status", body=META + "DeleteOptions", params=list_params),
            "parameters": scope_params + [pretty],
        }
        out[collection + "/{name}"] = {
            "get": operation("get", "read" + ids + scoped, kind, SAMPLE + kind),
            "put": operation("put", "replace" + ids + scoped, kind, SAMPLE + kind, ("200", "201"),
                             SAMPLE + kind, params=write_params),
            "patch": operation("patch", "patch" + ids + scoped, kind, SAMPLE + kind, ("200", "201"),
                               META + "Patch", patch_types,
                               write_params + [param("force", "query", "Force is going to \"force\" "
                                                     "Apply requests.", "boolean")]),
            "delete": operation("delete", "delete" + ids + scoped, kind, META + "Status",
                                ("200", "202"), META + "DeleteOptions",
                                params=[param("dryRun", "query", "When present, indicates that "
                                              "modifications should not be persisted.")]),
            "parameters": [name_param] + scope_params + [pretty],
        }
        if info["namespaced"]:
            out[PREFIX + "/" + resource] = {
                "get": operation("list", "list" + ids + kind + "ForAllNamespaces", kind,
                                 SAMPLE + kind + "List"),
                "parameters": list_params + [pretty],
            }
    return out


def discovery_doc(path, op_id, schema):
    return {"openapi": "3.0.0", "info": INFO, "paths": {path: {"get": {
        "description": "get available API versions", "operationId": op_id, "tags": ["apis"],
        "responses": {"200": {"description": "OK", "content": {JSON: {"schema": {
            "$ref": "#/components/schemas/" + META + schema}}}},
            "401": {"description": "Unauthorized"}}}}},
        "components": {"schemas": {META + schema: {
            "description": schema + " is a discovery document.", "type": "object"}}}}


BEARER = {"BearerToken": {"type": "apiKey", "description": "Bearer Token authentication",
                          "name": "authorization", "in": "header"}}
OPENAPI_V3 = {
    "apis": dumps(discovery_doc("/apis/", "getAPIVersions", "APIGroupList")),
    "apis/" + GROUP: dumps(discovery_doc("/apis/" + GROUP + "/", "getWardleExampleComAPIGroup",
                                         "APIGroup")),
    "apis/" + GV: dumps({"openapi": "3.0.0", "info": INFO, "paths": paths(True),
                         "components": {"schemas": schemas(), "securitySchemes": BEARER}}),
}


def openapi_hash(data):
    return hashlib.sha512(data).hexdigest().upper()


OPENAPI_V3_INDEX = dumps({"paths": {
    name: {"serverRelativeURL": "/openapi/v3/%s?hash=%s" % (name, openapi_hash(doc))}
    for name, doc in OPENAPI_V3.items()}})
OPENAPI_V2 = dumps({"swagger": "2.0", "info": INFO, "paths": paths(False),
                    "definitions": v2_schemas(), "securityDefinitions": BEARER,
                    "security": [{"BearerToken": []}]})


def parse_accept(value):
    """Media ranges by preference: [(type, params)], highest q first, then in order."""
    ranges = []
    for index, part in enumerate((value or "").split(",")):
        fields = [f.strip() for f in part.split(";")]
        if not fields[0]:
            continue
        params = {}
        for field in fields[1:]:
            if "=" in field:
                k, v = field.split("=", 1)
                params[k.strip().lower()] = v.strip().strip('"')
        try:
            q = float(params.pop("q", "1"))
        except ValueError:
            q = 1.0
        if q > 0:
            ranges.append((-q, index, fields[0].lower(), params))
    ranges.sort(key=lambda r: (r[0], r[1]))
    return [(mt, params) for _, _, mt, params in ranges]


def json_range(media_type):
    return media_type in (JSON, "application/*", "*/*")


# A flunder name whose GET closes the connection unanswered unless it is the connection's first
# request.
DROP_WHEN_REUSED = "drop-when-reused"
# A flunder name whose GET is answered chunked, with hop-by-hop response headers.
CHUNKED_ANSWER = "chunked-answer"
# A flunder name whose GET is answered 101 Switching Protocols, unasked.
UNASKED_SWITCH = "unasked-switch"
# A flunder name whose GET is answered after two informational (103 Early Hints) answers.
INFORMATIONAL_ANSWER = "informational-answer"
# A flunder name whose GET gets informational answers only, more than any client waits for.
ENDLESS_INFORMATIONAL = "endless-informational"
# A flunder name whose GET and PUT are answered with a redirect to another server.
REDIRECT_ANSWER = "redirect-answer"
REDIRECT_TARGET = "https://127.0.0.1:1/api/v1/namespaces"
# A flunder name whose GET is answered after SLOW_SECONDS.
SLOW_ANSWER = "slow-answer"
SLOW_SECONDS = 20


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "wardle-fixture"

    def log_message(self, *args):
        pass

    def setup(self):
        # The TLS handshake runs here, on the connection's own thread, so a slow or failing
        # client never blocks the accept loop.
        self.request.settimeout(10)
        self.request = CONTEXT.wrap_socket(self.request, server_side=True)
        self.request.settimeout(None)
        super().setup()

    def finish(self):
        try:
            super().finish()
        except OSError:
            pass
        # End TLS with a close_notify, as Go's server does: clients then see a clean close
        # rather than an unexpected EOF.
        try:
            self.connection.settimeout(1)
            self.connection.unwrap().close()
        except (OSError, ValueError):
            pass
        self.connection.close()

    def handle_one_request(self):
        self.entry = None
        # Requests read on this connection so far, this one included.
        self.served = getattr(self, "served", 0) + 1
        super().handle_one_request()

    def send_response(self, code, message=None):
        self.record(code)
        super().send_response(code, message)

    def record(self, code):
        if self.entry is not None and "code" not in self.entry:
            self.entry["code"] = code
            append_log(self.entry)

    # ---- plumbing

    def reply(self, code, body, ctype=JSON, headers=()):
        data = body if isinstance(body, bytes) else dumps(body)
        self.send_response(code)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(data)))
        for key, value in headers:
            self.send_header(key, value)
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(data)

    def reply_chunked(self, code, body):
        """Answers in two chunks with no length, as Go's servers answer large bodies, with
        hop-by-hop headers a proxy must not pass on."""
        data = dumps(body)
        self.send_response(code)
        self.send_header("Content-Type", JSON)
        self.send_header("Transfer-Encoding", "chunked")
        self.send_header("Connection", "keep-alive, X-Backend-Hop")
        self.send_header("Keep-Alive", "timeout=30")
        self.send_header("X-Backend-Hop", "1")
        self.send_header("X-Backend-End-To-End", "1")
        self.end_headers()
        half = len(data) // 2
        for part in (data[:half], data[half:], b""):
            self.wfile.write(b"%x\r\n%s\r\n" % (len(part), part))

    def reply_cached(self, data, ctype=JSON, headers=()):
        etag = '"%s"' % openapi_hash(data)
        wanted = [t.strip() for t in (self.headers.get("If-None-Match") or "").split(",")]
        if etag in wanted or "*" in wanted:
            self.send_response(304)
            self.send_header("ETag", etag)
            self.end_headers()
            return
        self.reply(200, data, ctype, [("ETag", etag), ("Vary", "Accept")] + list(headers))

    def read_body(self):
        if "chunked" in (self.headers.get("Transfer-Encoding") or "").lower():
            chunks = []
            while True:
                size = int(self.rfile.readline(65537).split(b";")[0].strip() or b"x", 16)
                if size == 0:
                    while self.rfile.readline(65537) not in (b"\r\n", b"\n", b""):
                        pass
                    return b"".join(chunks)
                chunks.append(self.rfile.read(size))
                self.rfile.readline(65537)
        length = int(self.headers.get("Content-Length") or 0)
        return self.rfile.read(length) if length > 0 else b""

    def identify(self):
        """The request-header authenticator of k8s.io/apiserver, and the log entry."""
        cert = self.connection.getpeercert()
        cn = None
        for rdn in (cert or {}).get("subject", ()):
            for key, value in rdn:
                if key == "commonName":
                    cn = value
        allowed = CONFIG["allowed_names"]
        cert_ok = bool(cert) and (not allowed or cn in allowed)
        user = next((v for v in self.headers.get_all("X-Remote-User", []) if v), None)
        uid = next((v for v in self.headers.get_all("X-Remote-Uid", []) if v), None)
        groups = [v for v in self.headers.get_all("X-Remote-Group", []) if v]
        extra, names, values = {}, [], {}
        for name, value in self.headers.items():
            lower = name.lower()
            if lower not in names:
                names.append(lower)
            if lower in ("authorization", "x-forwarded-for") or lower.startswith(("impersonate-", "x-remote-")):
                values.setdefault(lower, []).append(value)
            if lower.startswith("x-remote-extra-"):
                # kube lowercases the key, then percent-decodes it.
                key = urllib.parse.unquote(lower[len("x-remote-extra-"):])
                extra.setdefault(key, []).append(value)
        self.authenticated = cert_ok and bool(user)
        self.entry = {"time": time.time(), "method": self.command, "path": self.path, "cn": cn,
                      "authenticated": self.authenticated, "user": user, "uid": uid,
                      "groups": groups, "extra": extra, "headers": names, "header_values": values,
                      "host": self.headers.get("Host")}

    def do_request(self):
        url = urllib.parse.urlsplit(self.path)
        self.route = url.path
        self.query = {k: v[0] for k, v in urllib.parse.parse_qs(url.query, keep_blank_values=True).items()}
        self.identify()
        try:
            self.body = self.read_body()
        except (ValueError, OSError):
            self.close_connection = True
            return self.reply(400, bad_request("malformed request body"))
        try:
            self.route_request()
        except (BrokenPipeError, ConnectionResetError, ssl.SSLError, socket.timeout):
            self.close_connection = True
        except Exception:
            traceback.print_exc()
            sys.stderr.flush()
            if "code" in (self.entry or {}):
                self.close_connection = True
            else:
                self.reply(500, status(500, "InternalError", "the wardle fixture failed: %s"
                                       % traceback.format_exc().splitlines()[-1]))

    do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = do_HEAD = do_OPTIONS = do_request

    def wants_upgrade(self):
        tokens = [t.strip().lower() for v in self.headers.get_all("Connection", []) for t in v.split(",")]
        return "upgrade" in tokens and bool(self.headers.get("Upgrade"))

    def route_request(self):
        path, method = self.route, self.command
        if path in HEALTH or path.startswith(tuple(h + "/" for h in HEALTH)):
            return self.reply(200, b"ok", "text/plain; charset=utf-8")
        if path == "/_requests":
            if method == "DELETE":
                with log_lock:
                    open(state_file("requests.jsonl"), "w").close()
                return self.reply(200, [])
            return self.reply(200, read_log())
        if not self.authenticated:
            return self.reply(401, status(401, "Unauthorized", "Unauthorized"))
        if path.endswith("/flunders/" + DROP_WHEN_REUSED) and self.served > 1:
            # A kept-alive connection the server closes just as a request arrives (the race a
            # client's retry on a new connection covers): logged with code 0, not answered.
            self.record(0)
            self.close_connection = True
            return
        if path.endswith("/exec"):
            return self.exec_upgrade()
        if path.startswith(PREFIX + "/") or path == PREFIX:
            return self.api([s for s in path[len(PREFIX):].split("/") if s])
        if method != "GET":
            return self.reply(405, status(405, "MethodNotAllowed", "the server does not allow this "
                                          "method on the requested resource", {}))
        if path in ("/apis", "/apis/"):
            return self.discovery_root()
        if path in ("/apis/" + GROUP, "/apis/" + GROUP + "/"):
            return self.reply_cached(API_GROUP)
        if path == "/version":
            return self.reply(200, VERSION_INFO)
        if path == "/openapi/v2":
            if not any(json_range(mt) for mt, _ in parse_accept(self.headers.get("Accept") or JSON)):
                return self.reply(406, status(406, "NotAcceptable", "the wardle fixture serves "
                                              "OpenAPI v2 as JSON only"))
            return self.reply_cached(OPENAPI_V2)
        if path.startswith("/openapi/v3") and not CONFIG["openapi_v3"]:
            return self.reply(404, PATH_NOT_FOUND)
        if path == "/openapi/v3":
            return self.reply_cached(OPENAPI_V3_INDEX)
        if path.startswith("/openapi/v3/"):
            return self.openapi_v3(path[len("/openapi/v3/"):])
        return self.reply(404, PATH_NOT_FOUND)

    def discovery_root(self):
        if not CONFIG["group_list"]:
            # A server that lists no groups at /apis, only its own group-version.
            return self.reply(404, PATH_NOT_FOUND)
        if not CONFIG["aggregated_discovery"]:
            # A server from before aggregated discovery ignores what it does not know.
            return self.reply_cached(GROUP_LIST, JSON)
        accept = self.headers.get("Accept")
        if not accept:
            return self.reply_cached(GROUP_LIST, JSON)
        for media_type, params in parse_accept(accept):
            if not json_range(media_type):
                continue
            conversion = params.get("as")
            if not conversion:
                return self.reply_cached(GROUP_LIST, JSON)
            if (conversion == "APIGroupDiscoveryList" and params.get("g") == "apidiscovery.k8s.io"
                    and params.get("v") in AGGREGATED):
                return self.reply_cached(AGGREGATED[params["v"]], AGGREGATED_TYPE % params["v"])
        return self.reply(406, status(406, "NotAcceptable", "only the following media types are "
                                      "accepted: application/json, " + AGGREGATED_TYPE % "v2"))

    def openapi_v3(self, name):
        doc = OPENAPI_V3.get(name)
        if doc is None:
            return self.reply(404, PATH_NOT_FOUND)
        digest = openapi_hash(doc)
        wanted = self.query.get("hash")
        if wanted and wanted != digest:
            location = "/openapi/v3/%s?hash=%s" % (name, digest)
            return self.reply(301, b"", "text/plain", [("Location", location)])
        headers = [("Cache-Control", "public, immutable"),
                   ("Expires", time.strftime("%a, %d %b %Y %H:%M:%S GMT",
                                             time.gmtime(time.time() + 365 * 86400)))] if wanted else [
            ("Cache-Control", "no-cache, private")]
        return self.reply_cached(doc, JSON, headers)

    # ---- exec upgrades (CVE-2018-1002105)

    def exec_upgrade(self):
        parts = [s for s in self.route.split("/") if s]
        if not self.wants_upgrade():
            return self.reply(400, bad_request("Upgrade request required"))
        name = parts[-2] if len(parts) >= 2 else ""
        if name == REDIRECT_ANSWER:
            return self.reply(302, b"elsewhere", "text/plain", [("Location", REDIRECT_TARGET)])
        if name != "upgrade-ok":
            # The connection stays open for further requests: the failure a naive proxy must
            # not treat as an upgraded (raw, unauthenticated) tunnel.
            return self.reply(400, bad_request("the wardle fixture refuses to upgrade %r: only "
                                               "upgrade-ok is switched" % name))
        self.send_response(101)
        self.send_header("Connection", "Upgrade")
        self.send_header("Upgrade", self.headers.get("Upgrade"))
        self.end_headers()
        self.close_connection = True
        while True:
            data = self.rfile.read1(65536)
            if not data:
                return
            self.wfile.write(data)

    # ---- resources

    def output(self):
        """("json" | "Table" | "Partial", meta.k8s.io version), or None when not acceptable."""
        accept = self.headers.get("Accept")
        if not accept:
            return ("json", None)
        for media_type, params in parse_accept(accept):
            if not json_range(media_type):
                continue
            conversion = params.get("as")
            if not conversion:
                return ("json", None)
            if params.get("g") == "meta.k8s.io" and params.get("v") in ("v1", "v1beta1"):
                if conversion == "Table":
                    return ("Table", params["v"])
                if conversion in ("PartialObjectMetadata", "PartialObjectMetadataList"):
                    return ("Partial", params["v"])
        return None

    def render(self, obj, form):
        kind, version = form
        if kind == "Table":
            return table([obj], version, self.query.get("includeObject"),
                         rv=obj["metadata"].get("resourceVersion"))
        if kind == "Partial":
            return partial(obj, version)
        return obj

    def dry_run(self):
        return self.query.get("dryRun") == "All"

    def json_body(self, types=(dict,)):
        try:
            value = json.loads(self.body.decode("utf-8") or "null")
        except ValueError as e:
            value = e
        if not isinstance(value, types):
            self.reply(400, bad_request("the request body is not valid JSON for this operation: %s"
                                        % (value if isinstance(value, ValueError) else type(value).__name__)))
            return None
        return value

    def api(self, segs):
        method = self.command
        watch = self.query.get("watch") in ("true", "1")
        if segs and segs[0] == "watch":
            segs, watch = segs[1:], True
        if not segs:
            if method != "GET":
                return self.reply(405, status(405, "MethodNotAllowed", "the server does not allow "
                                              "this method on the requested resource", {}))
            # `?slow=1`: a backend slow to give its discovery document.
            if self.query.get("slow") == "1":
                time.sleep(SLOW_SECONDS)
            return self.reply_cached(RESOURCE_LIST)
        namespace = None
        if segs[0] == "namespaces" and len(segs) >= 3:
            namespace, segs = segs[1], segs[2:]
        resource, info = segs[0], RESOURCES.get(segs[0])
        if info is None or len(segs) > 2 or (namespace is not None and not info["namespaced"]):
            return self.reply(404, PATH_NOT_FOUND)
        name = segs[1] if len(segs) == 2 else None
        form = self.output()
        if form is None:
            return self.reply(406, status(406, "NotAcceptable", "the server was unable to respond "
                                          "with a content type that the client supports"))
        try:
            selection = Selection(resource, namespace, parse_labels(self.query.get("labelSelector")),
                                  parse_fields(self.query.get("fieldSelector")))
        except BadSelector as e:
            return self.reply(400, bad_request(str(e)))
        if name is None:
            if method == "GET":
                return self.watch(selection, form) if watch else self.list(selection, form)
            if method == "POST" and (namespace is not None or not info["namespaced"]):
                return self.create(resource, namespace, form)
            if method == "DELETE":
                return self.delete_collection(selection, form)
        elif namespace is not None or not info["namespaced"]:
            key = (resource, namespace or "", name)
            if method == "GET":
                if watch:
                    selection.fields.append(("=", "name", name))
                    return self.watch(selection, form)
                with cond:
                    obj = store.get(key)
                if obj is None:
                    return self.reply(404, not_found(resource, name))
                if name == CHUNKED_ANSWER:
                    return self.reply_chunked(200, self.render(obj, form))
                if name == REDIRECT_ANSWER:
                    return self.reply(302, b"elsewhere", "text/plain",
                                      [("Location", REDIRECT_TARGET)])
                if name == SLOW_ANSWER:
                    time.sleep(SLOW_SECONDS)
                if name in (INFORMATIONAL_ANSWER, ENDLESS_INFORMATIONAL):
                    for _ in range(2 if name == INFORMATIONAL_ANSWER else 8):
                        self.send_response_only(103)
                        self.send_header("Link", "</hint>; rel=preload")
                        self.end_headers()
                        self.wfile.flush()
                    if name == ENDLESS_INFORMATIONAL:
                        self.close_connection = True
                        return
                if name == UNASKED_SWITCH:
                    # Switches protocols for a request that did not ask to, then echoes: a
                    # tunnel a proxy must not open.
                    self.send_response(101)
                    self.send_header("Connection", "Upgrade")
                    self.send_header("Upgrade", "tunnel")
                    self.end_headers()
                    self.wfile.flush()
                    self.close_connection = True
                    return
                return self.reply(200, self.render(obj, form))
            if method == "PUT":
                if name == REDIRECT_ANSWER:
                    return self.reply(307, b"elsewhere", "text/plain",
                                      [("Location", REDIRECT_TARGET)])
                return self.update(key, form)
            if method == "PATCH":
                return self.patch(key, form)
            if method == "DELETE":
                return self.delete(key)
        else:
            return self.reply(404, PATH_NOT_FOUND)
        return self.reply(405, status(405, "MethodNotAllowed", "the server does not allow this "
                                      "method on the requested resource", {}))

    def list(self, selection, form):
        with cond:
            items, rv = selection.current(), str(revision)
        kind, version = form
        if kind == "Table":
            body = table(items, version, self.query.get("includeObject"), rv=rv)
        elif kind == "Partial":
            body = {"kind": "PartialObjectMetadataList", "apiVersion": "meta.k8s.io/" + version,
                    "metadata": {"resourceVersion": rv}, "items": [partial(o, version) for o in items]}
        else:
            body = {"kind": RESOURCES[selection.resource]["kind"] + "List", "apiVersion": GV,
                    "metadata": {"resourceVersion": rv}, "items": items}
        return self.reply(200, body)

    def check_object(self, obj, resource, namespace, name=None):
        """Defaults and checks kind, apiVersion, namespace and name: a Status on error."""
        kind = RESOURCES[resource]["kind"]
        if obj.get("apiVersion", GV) != GV:
            return bad_request("the API version in the data (%s) does not match the expected API "
                               "version (%s)" % (obj.get("apiVersion"), GV))
        if obj.get("kind", kind) != kind:
            return bad_request('%s in version "%s" cannot be handled as a %s' % (
                obj.get("kind"), VERSION, kind))
        # apiVersion and kind first, as kube serializes objects.
        rest = [(k, v) for k, v in obj.items() if k not in ("apiVersion", "kind")]
        obj.clear()
        obj["apiVersion"], obj["kind"] = GV, kind
        obj.update(rest)
        meta = obj.get("metadata")
        if meta is None:
            meta = obj["metadata"] = {}
        if not isinstance(meta, dict):
            return bad_request("metadata must be an object")
        if namespace is not None:
            if meta.get("namespace") not in (None, "", namespace):
                return bad_request("the namespace of the provided object does not match the "
                                   "namespace sent on the request")
            meta["namespace"] = namespace
        else:
            meta.pop("namespace", None)
        if name is not None and meta.get("name") not in (None, "", name):
            return bad_request("the name of the object (%s) does not match the name on the URL (%s)"
                               % (meta.get("name"), name))
        if name is not None:
            meta["name"] = name
        return None

    def create(self, resource, namespace, form):
        obj = self.json_body()
        if obj is None:
            return
        error = self.check_object(obj, resource, namespace)
        if error:
            return self.reply(error["code"], error)
        meta = obj["metadata"]
        name = meta.get("name") or ""
        if not name and meta.get("generateName"):
            name = meta["generateName"] + "".join(random.choice("bcdfghjklmnpqrstvwxz2456789")
                                                  for _ in range(5))
        if not name:
            return self.reply(422, invalid(resource, "", "metadata.name",
                                           "Required value: name or generateName is required"))
        if len(name) > 253 or not NAME_RE.match(name):
            return self.reply(422, invalid(resource, name, "metadata.name",
                                           'Invalid value: "%s": a lowercase RFC 1123 subdomain '
                                           "must consist of lower case alphanumeric characters, '-' "
                                           "or '.', and must start and end with an alphanumeric "
                                           "character" % name))
        meta["name"] = name
        meta["uid"] = str(uuid.uuid4())
        meta["creationTimestamp"] = now()
        meta["generation"] = 1
        meta.pop("resourceVersion", None)
        key = (resource, namespace or "", name)
        with cond:
            if key in store:
                exists = status(409, "AlreadyExists", '%s.%s "%s" already exists' % (resource, GROUP, name),
                                {"name": name, "group": GROUP, "kind": resource})
                obj = None
            elif not self.dry_run():
                obj = commit("ADDED", key, obj)
        if obj is None:
            return self.reply(409, exists)
        return self.reply(201, self.render(obj, form))

    def save_update(self, key, current, new):
        """Commits new over current keeping what clients may not change. Holds cond."""
        meta, old = new["metadata"], current["metadata"]
        for field in ("name", "uid", "creationTimestamp", "generation"):
            if field in old:
                meta[field] = old[field]
        if old.get("namespace") is not None:
            meta["namespace"] = old["namespace"]
        meta["resourceVersion"] = old["resourceVersion"]
        if new == current:
            return current  # a no-op write is not a new revision, as in kube's storage
        strip = lambda o: {k: v for k, v in o.items() if k not in ("metadata", "status")}
        if strip(new) != strip(current):
            meta["generation"] = old.get("generation", 1) + 1
        if self.dry_run():
            return new
        return commit("MODIFIED", key, new)

    def update(self, key, form):
        resource, namespace, name = key
        obj = self.json_body()
        if obj is None:
            return
        error = self.check_object(obj, resource, namespace or None, name)
        if error:
            return self.reply(error["code"], error)
        with cond:
            current = store.get(key)
            wanted = obj["metadata"].get("resourceVersion")
            if current is None:
                result = not_found(resource, name)
            elif wanted and wanted != current["metadata"]["resourceVersion"]:
                result = conflict(resource, name)
            else:
                result = self.save_update(key, current, obj)
        if result.get("kind") == "Status":
            return self.reply(result["code"], result)
        return self.reply(200, self.render(result, form))

    def patch(self, key, form):
        resource, namespace, name = key
        ctype = (self.headers.get("Content-Type") or "").split(";")[0].strip().lower()
        kinds = {"application/merge-patch+json": merge_patch,
                 "application/strategic-merge-patch+json": strategic_merge_patch,
                 "application/json-patch+json": json_patch,
                 "application/apply-patch+yaml": merge_patch}
        apply = kinds.get(ctype)
        if apply is None:
            return self.reply(415, status(415, "UnsupportedMediaType", 'the body of the request was in '
                                          'an unknown format - accepted media types include: ' +
                                          ", ".join(sorted(kinds))))
        body = self.json_body((list,) if apply is json_patch else (dict,))
        if body is None:
            return
        with cond:
            result, code = self.apply_patch(key, apply, ctype == "application/apply-patch+yaml", body)
        if result.get("kind") == "Status":
            return self.reply(result["code"], result)
        return self.reply(code, self.render(result, form))

    def apply_patch(self, key, apply, server_side, body):
        """(object or Status, code). Holds cond."""
        resource, namespace, name = key
        current = store.get(key)
        if current is None and server_side:
            # Server-side apply of a new object: a create (without managed fields).
            new = copy.deepcopy(body)
        elif current is None:
            return not_found(resource, name), 404
        else:
            try:
                new = apply(copy.deepcopy(current), body)
            except PatchError as e:
                return status(422, "Invalid", str(e)), 422
        if not isinstance(new, dict):
            return status(422, "Invalid", "the patch did not produce an object"), 422
        error = self.check_object(new, resource, namespace or None, name)
        if error:
            return error, error["code"]
        if current is None:
            new["metadata"].update({"uid": str(uuid.uuid4()), "creationTimestamp": now(),
                                    "generation": 1})
            new["metadata"].pop("resourceVersion", None)
            return (new if self.dry_run() else commit("ADDED", key, new)), 201
        current_rv = current["metadata"]["resourceVersion"]
        if new["metadata"].get("resourceVersion", current_rv) != current_rv:
            return conflict(resource, name), 409
        return self.save_update(key, current, new), 200

    def delete(self, key):
        resource, _, name = key
        try:
            options = json.loads(self.body) if self.body.strip() else {}
        except ValueError:
            options = None
        if not isinstance(options, dict):
            return self.reply(400, bad_request("the request body is not a DeleteOptions object"))
        preconditions = options.get("preconditions") or {}
        with cond:
            current, error = store.get(key), None
            if current is None:
                error = not_found(resource, name)
            else:
                meta = current["metadata"]
                for field in ("uid", "resourceVersion"):
                    if preconditions.get(field) and preconditions[field] != meta.get(field):
                        error = status(409, "Conflict", "Precondition failed: %s in precondition: "
                                       "%s, %s in object meta: %s" % (
                                           "UID" if field == "uid" else field,
                                           preconditions[field], field, meta.get(field)))
                if error is None and not self.dry_run():
                    commit("DELETED", key, copy.deepcopy(current))
        if error is not None:
            return self.reply(error["code"], error)
        return self.reply(200, {"kind": "Status", "apiVersion": "v1", "metadata": {},
                                "status": "Success", "details": {
                                    "name": name, "group": GROUP, "kind": resource,
                                    "uid": meta.get("uid")}})

    def delete_collection(self, selection, form):
        with cond:
            doomed = selection.current()
            deleted = []
            for obj in doomed:
                meta = obj["metadata"]
                key = (selection.resource, meta.get("namespace", ""), meta["name"])
                gone = copy.deepcopy(obj)
                deleted.append(gone if self.dry_run() else commit("DELETED", key, gone))
            rv = str(revision)
        return self.reply(200, {"kind": RESOURCES[selection.resource]["kind"] + "List",
                                "apiVersion": GV, "metadata": {"resourceVersion": rv},
                                "items": deleted})

    # ---- watch

    def write_chunk(self, data):
        self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))

    def client_gone(self):
        """True once the client closed its side (no client sends anything mid-watch)."""
        try:
            readable, _, _ = select.select([self.connection], [], [], 0)
        except (OSError, ValueError):
            return True
        if not readable and not self.connection.pending():
            return False
        self.connection.settimeout(0.05)
        try:
            return self.connection.recv(1) == b""
        except (socket.timeout, ssl.SSLWantReadError):
            return False
        except OSError:
            return True
        finally:
            self.connection.settimeout(None)

    def watch(self, selection, form):
        since = self.query.get("resourceVersion", "")
        initial_events = self.query.get("sendInitialEvents") == "true"
        bookmarks = self.query.get("allowWatchBookmarks") == "true"
        try:
            timeout = int(self.query.get("timeoutSeconds") or 1800)
            cursor = int(since or 0)
        except ValueError:
            return self.reply(400, bad_request("invalid resourceVersion or timeoutSeconds"))
        with cond:
            if since in ("", "0") or initial_events:
                initial, cursor = selection.current(), revision
            else:
                initial = []
        self.send_response(200)
        self.send_header("Content-Type", JSON)
        self.send_header("Transfer-Encoding", "chunked")
        self.send_header("Cache-Control", "no-cache, private")
        self.end_headers()
        kind, version = form
        include = self.query.get("includeObject")
        first = [True]

        def emit(event_type, obj):
            if event_type in ("ADDED", "MODIFIED", "DELETED"):
                if kind == "Table":
                    # kube prints column definitions with the first event only.
                    obj = table([obj], version, include, headers=first[0])
                    first[0] = False
                elif kind == "Partial":
                    obj = partial(obj, version)
            self.write_chunk(dumps({"type": event_type, "object": obj}) + b"\n")

        if cursor < HISTORY_START:
            emit("ERROR", status(410, "Expired", "too old resource version: %d (%d)"
                                 % (cursor, HISTORY_START)))
            self.wfile.write(b"0\r\n\r\n")
            return
        for obj in initial:
            emit("ADDED", obj)
        if initial_events and bookmarks:
            emit("BOOKMARK", {"kind": RESOURCES[selection.resource]["kind"], "apiVersion": GV,
                              "metadata": {"resourceVersion": str(cursor), "annotations": {
                                  "k8s.io/initial-events-end": "true"}}})
        deadline = time.monotonic() + timeout
        while True:
            with cond:
                index = bisect.bisect_right(event_rvs, cursor)
                if index == len(events):
                    left = deadline - time.monotonic()
                    if left <= 0:
                        break
                    cond.wait(min(left, 0.5))
                    index = bisect.bisect_right(event_rvs, cursor)
                batch = events[index:]
            if batch:
                cursor = batch[-1]["rv"]
                for event in batch:
                    if selection.matches(event["resource"], event["namespace"], event["object"]):
                        emit(event["type"], event["object"])
            elif self.client_gone():
                self.close_connection = True
                return
            if time.monotonic() >= deadline:
                break
        self.wfile.write(b"0\r\n\r\n")


class Server(http.server.ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True
    request_queue_size = 128

    def handle_error(self, request, client_address):
        sys.stderr.write("connection from %s: %r\n" % (client_address, sys.exc_info()[1]))
        sys.stderr.flush()


CONTEXT = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
CONTEXT.minimum_version = ssl.TLSVersion.TLSv1_2
CONTEXT.load_cert_chain(CONFIG["serving_cert"], CONFIG["serving_key"])
# CERT_OPTIONAL: a request without a client certificate gets a 401 from the handler rather
# than a failed handshake; a certificate that is presented must verify.
CONTEXT.verify_mode = ssl.CERT_OPTIONAL
CONTEXT.load_verify_locations(CONFIG["front_proxy_ca"])
CONTEXT.set_alpn_protocols(["http/1.1"])

deadline = time.monotonic() + 10
while True:
    try:
        server = Server((CONFIG["address"], CONFIG["port"]), Handler)
        break
    except OSError:
        # A restart on the same port may race the kernel's release of the old socket.
        if not CONFIG["port"] or time.monotonic() > deadline:
            raise
        time.sleep(0.1)
print(server.server_address[1], flush=True)
server.serve_forever()
"##;

/// A front-proxy CA and its `front-proxy-client` certificate (what kubegate presents to
/// APIService backends), made with openssl by [`make_front_proxy_ca`].
#[derive(Debug, Clone)]
pub struct FrontProxyCa {
    /// The CA certificate (PEM): [`WardleOptions::front_proxy_ca`].
    pub ca_cert: PathBuf,
    /// The CA key (PEM).
    pub ca_key: PathBuf,
    /// The client certificate, CN `front-proxy-client`.
    pub client_cert: PathBuf,
    /// Its key.
    pub client_key: PathBuf,
    dir: PathBuf,
}

/// Makes `front-proxy-ca.{crt,key}` and `front-proxy-client.{crt,key}` (CN
/// `front-proxy-client`, extended key usage clientAuth) in `dir`.
pub fn make_front_proxy_ca(dir: &Path) -> FrontProxyCa {
    let (ca_cert, ca_key) = make_ca(dir, "front-proxy-ca", "front-proxy-ca");
    let (client_cert, client_key) = issue(
        dir,
        (&ca_cert, &ca_key),
        "front-proxy-client",
        "front-proxy-client",
        CLIENT_EXTENSIONS,
    );
    FrontProxyCa {
        ca_cert,
        ca_key,
        client_cert,
        client_key,
        dir: dir.to_path_buf(),
    }
}

impl FrontProxyCa {
    /// Another client certificate from this CA, for `cn` (e.g. one not in the allowed names):
    /// (certificate, key) paths.
    pub fn client_certificate(&self, cn: &str) -> (PathBuf, PathBuf) {
        let stem = format!(
            "client-{}",
            cn.replace(|c: char| !c.is_ascii_alphanumeric(), "-")
        );
        issue(
            &self.dir,
            (&self.ca_cert, &self.ca_key),
            &stem,
            cn,
            CLIENT_EXTENSIONS,
        )
    }
}

/// How to run a [`Wardle`].
#[derive(Debug, Clone)]
pub struct WardleOptions {
    /// The CA that verifies front-proxy client certificates (kube's
    /// `--requestheader-client-ca-file`). Read when the server starts.
    pub front_proxy_ca: PathBuf,
    /// Common names a front-proxy client certificate may have (kube's
    /// `--requestheader-allowed-names`); empty allows any name the CA signed.
    pub allowed_names: Vec<String>,
    /// DNS names of the serving certificate, besides `localhost` and IP 127.0.0.1.
    pub dns_names: Vec<String>,
    /// Serve aggregated discovery (`apidiscovery.k8s.io/v2`, `v2beta1`) on `/apis` when asked;
    /// false answers the legacy `APIGroupList` always, as servers before kube 1.26 do.
    pub aggregated_discovery: bool,
    /// Serve `/apis` at all; false answers it 404, leaving only `/apis/<group>/<version>`.
    pub group_list: bool,
    /// Serve `/openapi/v3`; false answers it 404, leaving only `/openapi/v2`, as servers
    /// before kube 1.23 do.
    pub openapi_v3: bool,
    /// The port to bind; `None` picks a free one.
    pub port: Option<u16>,
    /// The address to listen on: 127.0.0.1, or one given to loopback in a private network
    /// namespace ([`crate::netns`]) when the test needs an address Endpoints may hold.
    pub address: std::net::IpAddr,
    /// Issue the serving certificate from this CA (certificate and key files) instead of a
    /// fresh one: replicas behind one Service share the APIService's `caBundle`.
    pub serving_ca: Option<(PathBuf, PathBuf)>,
}

impl WardleOptions {
    /// Defaults: allowed names `["front-proxy-client"]`, DNS name `api.wardle.svc` (service
    /// `api` in namespace `wardle`), aggregated discovery on, a free port.
    pub fn new(front_proxy_ca: impl Into<PathBuf>) -> WardleOptions {
        WardleOptions {
            front_proxy_ca: front_proxy_ca.into(),
            allowed_names: vec!["front-proxy-client".to_string()],
            dns_names: vec!["api.wardle.svc".to_string()],
            aggregated_discovery: true,
            group_list: true,
            openapi_v3: true,
            port: None,
            address: std::net::IpAddr::V4(std::net::Ipv4Addr::LOCALHOST),
            serving_ca: None,
        }
    }
}

/// The flunder name whose GET closes a reused connection unanswered (see the module docs).
pub const DROP_WHEN_REUSED: &str = "drop-when-reused";
/// The flunder name whose GET is answered chunked, with no length, and with hop-by-hop
/// response headers (`Connection: keep-alive, X-Backend-Hop`, `Keep-Alive`, `X-Backend-Hop`)
/// next to an end-to-end `X-Backend-End-To-End`.
pub const CHUNKED_ANSWER: &str = "chunked-answer";
/// The flunder name whose GET is answered `101 Switching Protocols` although it did not ask.
pub const UNASKED_SWITCH: &str = "unasked-switch";
/// The flunder name whose GET is answered `200` after two `103 Early Hints` informational
/// answers.
pub const INFORMATIONAL_ANSWER: &str = "informational-answer";
/// The flunder name whose GET gets eight `103` informational answers and then nothing (the
/// connection closes).
pub const ENDLESS_INFORMATIONAL: &str = "endless-informational";
/// The flunder name whose GET (`302`) and PUT (`307`) are answered with a redirect to
/// [`REDIRECT_TARGET`].
pub const REDIRECT_ANSWER: &str = "redirect-answer";
/// Where [`REDIRECT_ANSWER`]'s redirects point.
pub const REDIRECT_TARGET: &str = "https://127.0.0.1:1/api/v1/namespaces";
/// The flunder name whose GET is answered only after [`SLOW_SECONDS`].
pub const SLOW_ANSWER: &str = "slow-answer";
/// How long a GET of [`SLOW_ANSWER`] takes.
pub const SLOW_SECONDS: u64 = 20;

/// The group of the sample API.
pub const GROUP: &str = "wardle.example.com";
/// Its only version.
pub const VERSION: &str = "v1alpha1";

/// A running sample extension API server; killed (by pid) on drop.
pub struct Wardle {
    opts: WardleOptions,
    port: u16,
    child: Option<Child>,
    dir: tempfile::TempDir,
}

impl Wardle {
    /// Makes a serving CA and certificate, then starts the server and waits until it listens.
    pub fn start(opts: WardleOptions) -> Wardle {
        assert!(
            opts.front_proxy_ca.is_file(),
            "front-proxy CA {} does not exist",
            opts.front_proxy_ca.display()
        );
        let dir = tempfile::tempdir().expect("temp dir for the wardle fixture");
        let (ca_cert, ca_key) = match &opts.serving_ca {
            Some((cert, key)) => {
                let copies = (
                    dir.path().join("serving-ca.crt"),
                    dir.path().join("serving-ca.key"),
                );
                std::fs::copy(cert, &copies.0).expect("copy the shared serving CA certificate");
                std::fs::copy(key, &copies.1).expect("copy the shared serving CA key");
                copies
            }
            None => make_ca(dir.path(), "serving-ca", "wardle-serving-ca"),
        };
        let mut sans = Vec::new();
        for name in &opts.dns_names {
            assert!(
                !name.is_empty()
                    && name
                        .chars()
                        .all(|c| c.is_ascii_alphanumeric() || "-.*".contains(c)),
                "bad DNS name for the serving certificate: {name:?}"
            );
            sans.push(format!("DNS:{name}"));
        }
        sans.extend(["DNS:localhost".to_string(), "IP:127.0.0.1".to_string()]);
        if !opts.address.is_loopback() {
            sans.push(format!("IP:{}", opts.address));
        }
        let cn = opts.dns_names.first().map_or("wardle", String::as_str);
        issue(
            dir.path(),
            (&ca_cert, &ca_key),
            "serving",
            cn,
            &format!(
                "subjectAltName={}\nbasicConstraints=CA:FALSE\nkeyUsage=critical,digitalSignature\nextendedKeyUsage=serverAuth\n",
                sans.join(",")
            ),
        );
        write(&dir.path().join("server.py"), SERVER_PY);
        let mut wardle = Wardle {
            port: opts.port.unwrap_or(0),
            opts,
            child: None,
            dir,
        };
        wardle.spawn();
        wardle
    }

    fn spawn(&mut self) {
        let state = self.dir.path();
        let config = json!({
            "front_proxy_ca": self.opts.front_proxy_ca,
            "allowed_names": self.opts.allowed_names,
            "aggregated_discovery": self.opts.aggregated_discovery,
            "group_list": self.opts.group_list,
            "openapi_v3": self.opts.openapi_v3,
            "port": self.port,
            "address": self.opts.address.to_string(),
            "serving_cert": state.join("serving.crt"),
            "serving_key": state.join("serving.key"),
        });
        write(&state.join("config.json"), config.to_string());
        // Appended, so the log of a restarted server still shows why the previous one ended.
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(state.join("server.log"))
            .expect("wardle fixture log");
        let mut child = Command::new("python3")
            .arg(state.join("server.py"))
            .arg(state)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(log)
            .spawn()
            .expect("start the python3 wardle fixture (is python3 installed?)");
        match crate::reported_port(&mut child, Duration::from_secs(30)) {
            Some(port) => {
                self.port = port;
                self.child = Some(child);
            }
            None => {
                let _ = child.kill();
                let _ = child.wait();
                panic!("the wardle fixture did not start:\n{}", self.log());
            }
        }
    }

    /// The port it listens on (the same across [`Wardle::restart`]).
    pub fn port(&self) -> u16 {
        self.port
    }

    /// `https://<address>:<port>`.
    pub fn url(&self) -> String {
        format!(
            "https://{}",
            std::net::SocketAddr::new(self.opts.address, self.port)
        )
    }

    /// The process id of the server (0 while stopped).
    pub fn pid(&self) -> u32 {
        self.child.as_ref().map_or(0, Child::id)
    }

    /// The options it was started with.
    pub fn options(&self) -> &WardleOptions {
        &self.opts
    }

    /// The serving CA certificate file.
    pub fn ca_file(&self) -> PathBuf {
        self.dir.path().join("serving-ca.crt")
    }

    /// The serving CA certificate, PEM.
    pub fn ca_pem(&self) -> String {
        std::fs::read_to_string(self.ca_file()).expect("read the wardle serving CA")
    }

    /// The serving CA's certificate and key files, for [`WardleOptions::serving_ca`].
    pub fn serving_ca(&self) -> (PathBuf, PathBuf) {
        (
            self.dir.path().join("serving-ca.crt"),
            self.dir.path().join("serving-ca.key"),
        )
    }

    /// The serving CA PEM in base64: an APIService's `spec.caBundle`.
    pub fn ca_bundle_base64(&self) -> String {
        base64(self.ca_pem().as_bytes())
    }

    /// An `apiregistration.k8s.io/v1` APIService for `v1alpha1.wardle.example.com` pointing at
    /// service `namespace/name` on this server's port, with the caBundle.
    pub fn apiservice(&self, service_namespace: &str, service_name: &str) -> Value {
        json!({
            "apiVersion": "apiregistration.k8s.io/v1",
            "kind": "APIService",
            "metadata": {"name": format!("{VERSION}.{GROUP}")},
            "spec": {
                "group": GROUP,
                "version": VERSION,
                "service": {"namespace": service_namespace, "name": service_name, "port": self.port},
                "caBundle": self.ca_bundle_base64(),
                "groupPriorityMinimum": 1000,
                "versionPriority": 15,
            },
        })
    }

    /// Every request received so far, oldest first, including refused ones and those of earlier
    /// runs of a restarted server; `/_requests` itself is not logged. Each entry: `method`,
    /// `path` (with query), `cn` (verified client certificate CN or null), `authenticated`,
    /// `user`, `uid`, `groups`, `extra` (as the headers presented them), `headers` (all header
    /// names, lowercased), `header_values` (raw values of `authorization`, `impersonate-*`,
    /// `x-remote-*`), `code` (the response status; null if none was sent) and `time`. An entry
    /// is written when the response starts, so a watch is logged while it streams.
    pub fn requests(&self) -> Vec<Value> {
        crate::read_jsonl(&self.dir.path().join("requests.jsonl"))
    }

    /// Forgets the request log.
    pub fn clear_requests(&self) {
        write(&self.dir.path().join("requests.jsonl"), "");
    }

    /// The server's stderr so far (tracebacks, handshake failures).
    pub fn log(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("server.log")).unwrap_or_default()
    }

    /// Kills the server (by pid) and reaps it; connections are refused until
    /// [`Wardle::restart`].
    pub fn stop(&mut self) {
        if let Some(mut child) = self.child.take() {
            // Child::kill signals this child's pid only.
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// Stops the server if it runs and starts it again on the same port, with the same
    /// certificates and stored objects (watches from before cannot resume: 410 Expired).
    pub fn restart(&mut self) {
        self.stop();
        self.spawn();
    }
}

impl Drop for Wardle {
    fn drop(&mut self) {
        self.stop();
    }
}

/// Registers `wardle` with `gate` as the tests do: the ExternalName Service `wardle/api`
/// (dialled at `localhost`, verified as `api.wardle.svc`, which its certificate names; kube's
/// validation forbids loopback Endpoints) and its APIService, in a new `wardle` namespace.
/// Returns at once; [`wait_until_served`] waits for the group to be served.
pub fn register(gate: &crate::Kubegate, wardle: &Wardle) {
    gate.ok(&["create", "namespace", "wardle"]);
    let objects = json!({
        "apiVersion": "v1",
        "kind": "List",
        "items": [
            {"apiVersion": "v1", "kind": "Service",
             "metadata": {"name": "api", "namespace": "wardle"},
             "spec": {"type": "ExternalName", "externalName": "localhost"}},
            wardle.apiservice("wardle", "api"),
        ]
    });
    gate.ok_stdin(&["apply", "-f", "-"], &objects.to_string());
}

/// Waits until kubegate has the sample API's APIService `Available=True` and `flunders` in its
/// merged discovery (fetched in the background once the backend is available), failing the
/// test with the APIService and kubegate's log otherwise.
pub fn wait_until_served(gate: &crate::Kubegate) {
    let apiservice = format!("{VERSION}.{GROUP}");
    let available = crate::eventually(Duration::from_secs(20), || {
        let out = gate.kubectl(&[
            "get",
            "apiservice",
            &apiservice,
            "-o",
            "jsonpath={.status.conditions[?(@.type==\"Available\")].status}",
        ]);
        String::from_utf8_lossy(&out.stdout).trim() == "True"
    });
    assert!(
        available,
        "APIService never became available: {}\n{}",
        gate.ok(&["get", "apiservice", &apiservice, "-o", "yaml"]),
        crate::tail(&gate.log(), 30)
    );
    let discovered = crate::eventually(Duration::from_secs(10), || {
        String::from_utf8_lossy(&gate.kubectl_fresh(&["api-resources"]).stdout).contains("flunders")
    });
    assert!(discovered, "flunders never appeared in api-resources");
}

/// Standard base64 with padding (RFC 4648 §4).
fn base64(data: &[u8]) -> String {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::with_capacity(data.len().div_ceil(3) * 4);
    for chunk in data.chunks(3) {
        let b = [
            chunk[0],
            *chunk.get(1).unwrap_or(&0),
            *chunk.get(2).unwrap_or(&0),
        ];
        let n = (u32::from(b[0]) << 16) | (u32::from(b[1]) << 8) | u32::from(b[2]);
        for i in 0..4 {
            if i <= chunk.len() {
                out.push(char::from(ALPHABET[((n >> (18 - 6 * i)) & 0x3f) as usize]));
            } else {
                out.push('=');
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::base64;

    #[test]
    fn base64_matches_rfc4648() {
        assert_eq!(base64(b""), "");
        assert_eq!(base64(b"f"), "Zg==");
        assert_eq!(base64(b"fo"), "Zm8=");
        assert_eq!(base64(b"foo"), "Zm9v");
        assert_eq!(base64(b"foob"), "Zm9vYg==");
        assert_eq!(base64(&[0xfb, 0xff]), "+/8=");
    }
}
