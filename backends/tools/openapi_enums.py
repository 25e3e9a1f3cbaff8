#!/usr/bin/env python3
"""Writes backends/src/openapi/enums.rs: the enum values kube-openapi adds to kube-apiserver's
OpenAPI documents (`enum` on a property, "Possible enum values:" in its description), for the
API packages whose definitions kubegate's documents hold. k8s-openapi's schemas carry neither.

Reads the Go sources of k8s.io/api and k8s.io/apiextensions-apiserver at v0.33.0 from bare git
mirrors (the `fetch` tool's /work/.mirror layout by default) and follows kube-openapi's
generators/enum.go: a `+enum` string type's values are the typed constants of that type (one
per value, the longest comment winning), the description lines are ` - `"value"` comment`
with the constant's name trimmed from the comment, sorted.

Usage: python3 backends/tools/openapi_enums.py [MIRROR_DIR] > backends/src/openapi/enums.rs
       cargo fmt
"""
import re
import subprocess
import sys

MIRROR = sys.argv[1] if len(sys.argv) > 1 else "/work/.mirror"
TAG = "v0.33.0"
# (repository, path, Go import path, OpenAPI definition prefix)
PACKAGES = [
    ("kubernetes+api", "core/v1", "k8s.io/api/core/v1", "io.k8s.api.core.v1"),
    ("kubernetes+api", "discovery/v1", "k8s.io/api/discovery/v1", "io.k8s.api.discovery.v1"),
    ("kubernetes+api", "autoscaling/v1", "k8s.io/api/autoscaling/v1", "io.k8s.api.autoscaling.v1"),
    ("kubernetes+apiextensions-apiserver", "pkg/apis/apiextensions/v1",
     "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1",
     "io.k8s.apiextensions-apiserver.pkg.apis.apiextensions.v1"),
]


def git(repo, *args):
    return subprocess.run(["git", "--git-dir", f"{MIRROR}/{repo}/repo", *args],
                          check=True, capture_output=True, text=True).stdout


def go_files(repo, path):
    names = git(repo, "ls-tree", "--name-only", f"{TAG}:{path}").split()
    for name in names:
        if name.endswith(".go") and not name.endswith("_test.go") and not name.startswith("zz_") \
                and "generated" not in name:
            yield git(repo, "show", f"{TAG}:{path}/{name}")


class Package:
    def __init__(self, import_path, prefix):
        self.import_path = import_path
        self.prefix = prefix
        self.imports = {}      # alias -> import path
        self.enum_types = set()
        self.consts = {}       # name -> (type or None, expression, comment lines)
        self.structs = {}      # name -> [(json name, go type)]


def parse(pkg, source):
    lines = source.split("\n")
    comment = []
    in_const = in_struct = in_import = False
    struct_name = None
    depth = 0
    for raw in lines:
        line = raw.strip()
        if in_import:
            if line == ")":
                in_import = False
                continue
            m = re.match(r'(\w+)?\s*"([^"]+)"', line)
            if m:
                alias = m.group(1) or m.group(2).rsplit("/", 1)[-1]
                pkg.imports[alias] = m.group(2)
            continue
        if line.startswith("import ("):
            in_import = True
            continue
        m = re.match(r'import (\w+)?\s*"([^"]+)"', line)
        if m:
            pkg.imports[m.group(1) or m.group(2).rsplit("/", 1)[-1]] = m.group(2)
            continue
        if in_struct:
            depth += line.count("{") - line.count("}")
            if depth <= 0:
                in_struct = False
                continue
            if depth == 1:
                m = re.match(r'(\w+)\s+([\w.\[\]*]+)\s+`json:"([^",]*)', line)
                if m and m.group(3) and m.group(3) != "-":
                    pkg.structs[struct_name].append((m.group(3), m.group(2)))
                # An embedded struct whose fields are inlined (EphemeralContainerCommon).
                m = re.match(r'(\w+)\s+`json:",inline"', line)
                if m:
                    pkg.structs[struct_name].append(("", m.group(1)))
            continue
        if line.startswith("//"):
            comment.append(line[2:].strip() if line.startswith("// ") or line == "//" else line[2:])
            continue
        if in_const:
            if line == ")":
                in_const = False
            else:
                m = re.match(r'(\w+)\s+(\w+(?:\.\w+)?)?\s*=\s*(.+?)\s*(//.*)?$', line)
                if m:
                    pkg.consts[m.group(1)] = (m.group(2), m.group(3), comment)
            comment = []
            continue
        if line.startswith("const ("):
            in_const = True
            comment = []
            continue
        m = re.match(r'const (\w+)\s+(\w+(?:\.\w+)?)?\s*=\s*(.+?)\s*(//.*)?$', line)
        if m:
            pkg.consts[m.group(1)] = (m.group(2), m.group(3), comment)
            comment = []
            continue
        m = re.match(r'type (\w+) string\s*$', line)
        if m:
            if any(c.strip() == "+enum" for c in comment):
                pkg.enum_types.add(m.group(1))
            comment = []
            continue
        m = re.match(r'type (\w+) struct \{', line)
        if m:
            struct_name = m.group(1)
            pkg.structs[struct_name] = []
            in_struct = True
            depth = 1
            comment = []
            continue
        comment = []


def main():
    packages = {}
    for repo, path, import_path, prefix in PACKAGES:
        pkg = Package(import_path, prefix)
        for source in go_files(repo, path):
            parse(pkg, source)
        packages[import_path] = pkg

    def resolve(pkg, name):
        """(package, local name) of a possibly qualified identifier."""
        if "." in name:
            alias, local = name.split(".", 1)
            return packages.get(pkg.imports.get(alias)), local
        return pkg, name

    def const_value(pkg, expr):
        expr = expr.strip()
        m = re.match(r'^"((?:[^"\\]|\\.)*)"$', expr)
        if m:
            return m.group(1)
        m = re.match(r'^[\w.]+\((.+)\)$', expr)   # a conversion: Type(value)
        if m:
            return const_value(pkg, m.group(1))
        owner, local = resolve(pkg, expr)
        if owner and local in owner.consts:
            return const_value(owner, owner.consts[local][1])
        return None

    # enum type (qualified name) -> {value: (const name, comment)}
    enums = {}
    for pkg in packages.values():
        for name in pkg.enum_types:
            enums[f"{pkg.prefix}.{name}"] = {}
    for pkg in packages.values():
        for const, (ty, expr, comment) in pkg.consts.items():
            if not ty:
                m = re.match(r'^([\w.]+)\(', expr.strip())
                ty = m.group(1) if m else None
            if not ty:
                continue
            owner, local = resolve(pkg, ty)
            if not owner:
                continue
            key = f"{owner.prefix}.{local}"
            if key not in enums:
                continue
            value = const_value(pkg, expr)
            if value is None:
                continue
            text = " ".join(comment)
            existing = enums[key].get(value)
            if existing is None or len(existing[1]) < len(text) or (
                    len(existing[1]) == len(text) and existing[1] > text):
                enums[key][value] = (const, text)

    def line(value, const, text):
        text = text.strip()
        if text.startswith(const):
            text = text[len(const):]
        text = re.sub(r"\s+", " ", text.strip())
        quoted = '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'
        # kube-openapi's description drops each line's trailing space (a value without a comment).
        return f" - `{quoted}` {text}".rstrip()

    def fields_of(pkg, struct):
        for json_name, go_type in pkg.structs.get(struct, []):
            if json_name:
                yield json_name, go_type
            else:
                yield from fields_of(pkg, go_type)

    uses = []   # (definition, property, where, enum)
    for pkg in packages.values():
        for struct in sorted(pkg.structs):
            for json_name, go_type in fields_of(pkg, struct):
                where = ""
                base = go_type.lstrip("*")
                if base.startswith("[]"):
                    where, base = "items", base[2:].lstrip("*")
                elif base.startswith("map[string]"):
                    where, base = "additionalProperties", base[len("map[string]"):].lstrip("*")
                owner, local = resolve(pkg, base)
                if not owner:
                    continue
                key = f"{owner.prefix}.{local}"
                if key in enums and enums[key]:
                    uses.append((f"{pkg.prefix}.{struct}", json_name, where, key))

    out = []
    out.append("//! The enums kube-openapi puts in kube-apiserver's OpenAPI documents (`enum` on a property,")
    out.append("//! its items or its map values, and \"Possible enum values:\" closing the property's")
    out.append("//! description), which k8s-openapi's schemas lack. Generated from the `+enum` types of")
    out.append("//! k8s.io/api and k8s.io/apiextensions-apiserver v0.33.0 by `backends/tools/openapi_enums.py`;")
    out.append("//! do not edit by hand.")
    out.append("")
    out.append("/// An enum type: its values, sorted, and its description lines (` - `\"value\"` meaning`), sorted.")
    out.append("pub(super) struct EnumType {")
    out.append("    pub name: &'static str,")
    out.append("    pub values: &'static [&'static str],")
    out.append("    pub lines: &'static [&'static str],")
    out.append("}")
    out.append("")
    out.append("/// (definition, property, where the enum applies: `\"\"` the property itself, `items`,")
    out.append("/// `additionalProperties`; the enum type's name in [`ENUM_TYPES`]).")
    out.append("pub(super) const ENUM_PROPERTIES: &[(&str, &str, &str, &str)] = &[")
    for d, p, w, e in sorted(uses):
        out.append(f"    ({rust(d)}, {rust(p)}, {rust(w)}, {rust(e)}),")
    out.append("];")
    out.append("")
    out.append("pub(super) const ENUM_TYPES: &[EnumType] = &[")
    for key in sorted(enums):
        values = enums[key]
        if not values:
            continue
        vals = sorted(values, key=lambda v: '"' + v + '"')
        lines = sorted(line(v, c, t) for v, (c, t) in values.items())
        out.append("    EnumType {")
        out.append(f"        name: {rust(key)},")
        out.append("        values: &[" + ", ".join(rust(v) for v in vals) + "],")
        out.append("        lines: &[")
        for l in lines:
            out.append(f"            {rust(l)},")
        out.append("        ],")
        out.append("    },")
    out.append("];")
    print("\n".join(out))


def rust(s):
    return '"' + s.replace("\\", "\\\\").replace('"', '\\"') + '"'


if __name__ == "__main__":
    main()
