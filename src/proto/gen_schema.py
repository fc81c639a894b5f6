#!/usr/bin/env python3
"""Generates schema.rs: the protobuf -> JSON field table for kgate's proto module.

Inputs (paths given on the command line):
  K8S_PB   unpacked k8s-pb crate source (src/), for proto tags, scalar types and message references
  GO_API   k8s.io/api source at the served release, for JSON names, omitempty and pointer-ness
  GO_MACH  k8s.io/apimachinery source at the same release
  GO_EXT   k8s.io/apiextensions-apiserver source at the same release
  OUT      path of schema.rs to write (run `cargo fmt` afterwards)

The proto tags alone cannot tell `*int32` from `int32`, which decides whether an explicit zero
must survive into JSON, so the Go struct tags are the authority for the JSON side.
"""
import os
import re
import sys

K8S_PB, GO_API, GO_MACH, GO_EXT, OUT = sys.argv[1:6]

# k8s-pb module dir -> (proto package, Go package dir)
def pkg_of(moddir):
    parts = moddir.split("/")
    if parts[0] == "api":
        return "k8s.io.api." + ".".join(parts[1:]), os.path.join(GO_API, *parts[1:])
    if parts[0] == "apimachinery":
        return "k8s.io.apimachinery." + ".".join(parts[1:]), os.path.join(GO_MACH, *parts[1:])
    if parts[0] == "apiextensions_apiserver":
        return "k8s.io.apiextensions_apiserver." + ".".join(parts[1:]), os.path.join(GO_EXT, *parts[1:])
    return None, None


def wanted(moddir):
    parts = moddir.split("/")
    if parts[0] == "api":
        # kubectl 1.32/1.33 only sends GA versions of built-in types.
        return re.fullmatch(r"v[0-9]+", parts[-1]) is not None
    if parts[0] == "apimachinery":
        return parts[-1] in ("v1", "intstr", "runtime", "resource") and "testapigroup" not in parts
    if parts[0] == "apiextensions_apiserver":
        return parts[-1] == "v1"
    return False


FIELD_RE = re.compile(r"#\[prost\(([^]]*)\)\]\s*pub (r#)?(\w+):\s*([^;]*?),\s*(?=(///|#\[|pub |\}))", re.S)
STRUCT_RE = re.compile(r"pub struct (\w+) \{(\}|.*?\n\})", re.S)


def parse_pb():
    msgs = {}
    for root, _dirs, files in os.walk(K8S_PB):
        if "mod.rs" not in files:
            continue
        moddir = os.path.relpath(root, K8S_PB)
        if not wanted(moddir):
            continue
        src = open(os.path.join(root, "mod.rs")).read()
        for m in STRUCT_RE.finditer(src):
            name, body = m.group(1), m.group(2)
            fields = []
            for f in FIELD_RE.finditer(body):
                attr, fname, ty = f.group(1), f.group(3), " ".join(f.group(4).split())
                tag = int(re.search(r'tag = "(\d+)"', attr).group(1))
                fields.append((tag, fname, attr, ty))
            msgs[(moddir, name)] = fields
    return msgs


def resolve(moddir, ty):
    """Turns a prost Rust type path into (moddir, struct name)."""
    m = re.search(r"BTreeMap<\s*::prost::alloc::string::String,\s*(.*)$", ty)
    if m:
        ty = m.group(1)
    for wrap in ("::core::option::Option<", "::prost::alloc::vec::Vec<", "::prost::alloc::boxed::Box<"):
        ty = ty.replace(wrap, "")
    ty = ty.replace(">", "").replace(",", " ").strip()
    parts = ty.split("::")
    cur = moddir.split("/")
    for p in parts[:-1]:
        if p == "super":
            cur = cur[:-1]
        elif p:
            cur = cur + [p]
    return "/".join(cur), parts[-1]


GO_STRUCT_RE = re.compile(r"^type (\w+) struct \{\n(.*?)^\}", re.S | re.M)
GO_FIELD_RE = re.compile(r'^\s*(\w+\s+)?(\S+)\s+`([^`]*)`', re.M)


def parse_go(godir):
    out = {}
    if not godir or not os.path.isdir(godir):
        return out
    for fn in sorted(os.listdir(godir)):
        if not fn.endswith(".go") or fn.endswith("_test.go") or fn.startswith("zz_") or fn.endswith(".pb.go"):
            continue
        src = open(os.path.join(godir, fn)).read()
        for m in GO_STRUCT_RE.finditer(src):
            fields = {}
            for fm in GO_FIELD_RE.finditer(m.group(2)):
                gotype, tags = fm.group(2), fm.group(3)
                pm = re.search(r'protobuf:"([^"]*)"', tags)
                if not pm:
                    continue
                jm = re.search(r'json:"([^"]*)"', tags)
                jparts = (jm.group(1) if jm else "").split(",")
                pparts = pm.group(1).split(",")
                if len(pparts) < 2 or not pparts[1].isdigit():
                    continue
                num = int(pparts[1])
                fields[num] = {
                    "json": jparts[0],
                    "omitempty": "omitempty" in jparts[1:],
                    "inline": "inline" in jparts[1:],
                    "pointer": gotype.startswith("*"),
                }
            out[m.group(1).lower()] = (m.group(1), fields)
    return out


def camel(snake):
    head, *rest = snake.split("_")
    return head + "".join(p[:1].upper() + p[1:] for p in rest)


# Messages whose JSON form is not an object of their fields.
SHAPES = {
    "k8s.io.apimachinery.pkg.apis.meta.v1.Time": "Time",
    "k8s.io.apimachinery.pkg.apis.meta.v1.MicroTime": "MicroTime",
    "k8s.io.apimachinery.pkg.apis.meta.v1.Duration": "Duration",
    "k8s.io.apimachinery.pkg.apis.meta.v1.FieldsV1": "RawJson",
    "k8s.io.apimachinery.pkg.util.intstr.IntOrString": "IntOrString",
    "k8s.io.apimachinery.pkg.api.resource.Quantity": "Quantity",
    "k8s.io.apimachinery.pkg.runtime.RawExtension": "RawJson",
    "k8s.io.apiextensions_apiserver.pkg.apis.apiextensions.v1.JSON": "RawJson",
    "k8s.io.apiextensions_apiserver.pkg.apis.apiextensions.v1.JSONSchemaPropsOrArray": "SchemaOrArray",
    "k8s.io.apiextensions_apiserver.pkg.apis.apiextensions.v1.JSONSchemaPropsOrBool": "SchemaOrBool",
    "k8s.io.apiextensions_apiserver.pkg.apis.apiextensions.v1.JSONSchemaPropsOrStringArray": "SchemaOrStringArray",
}


def main():
    pb = parse_pb()
    go_cache = {}
    entries = {}  # key -> (fullname, shape, fields)
    for (moddir, name), fields in pb.items():
        pkg, godir = pkg_of(moddir)
        if godir not in go_cache:
            go_cache[godir] = parse_go(godir)
        goname, gofields = go_cache[godir].get(name.lower(), (name, None))
        full = pkg + "." + goname
        shape = SHAPES.get(full, "Object")
        if shape == "Object" and gofields is None and len(fields) == 1 and fields[0][1] == "items" \
                and "repeated" in fields[0][2]:
            # Go `type X []string` travels as a wrapper message but is a plain JSON array.
            shape = "Items"
        out = []
        for tag, fname, attr, ty in fields:
            kind = attr.split(",")[0].strip()
            rep = "S"
            ref = None
            if kind.startswith("btree_map"):
                rep = "M"
                kind = re.search(r'"string, (\w+)"', attr).group(1)
            elif "repeated" in attr:
                rep = "L"
            kind = kind.split("=")[0].strip()
            if kind == "message":
                ref = resolve(moddir, ty)
            info = (gofields or {}).get(tag)
            if info is None:
                # Fields newer than the served release: keep them if sent, named the usual way.
                info = {"json": camel(fname), "omitempty": True, "inline": False, "pointer": True}
            if info["json"] == "-":
                continue
            out.append((tag, info, kind, rep, ref))
        entries[(moddir, name)] = (full, shape, out)

    order = sorted(entries, key=lambda k: entries[k][0])
    index = {k: i for i, k in enumerate(order)}
    kinds = {"string": "Str", "bytes": "Bytes", "bool": "Bool", "int32": "I32", "int64": "I64",
             "double": "F64", "message": None}
    lines = [
        "//! Generated by gen_schema.py from k8s-pb 0.9 (proto tags and types) and the Go types of",
        "//! k8s.io/api, apimachinery and apiextensions-apiserver v0.33.13 (JSON names, omitempty,",
        "//! pointer-ness). Do not edit by hand; rerun the script instead.",
        "",
        "use super::schema_types::{Field, INLINE, Kind, Message, OMITEMPTY, POINTER, Rep, Shape};",
        "",
        "/// Every message kgate can decode, sorted by full proto name for binary search.",
        f"pub(super) static MESSAGES: [Message; {len(order)}] = [",
    ]
    for k in order:
        full, shape, fields = entries[k]
        fl = []
        for tag, info, kind, rep, ref in fields:
            if kind == "message":
                if ref not in index:
                    sys.exit(f"unresolved {ref} in {full}")
                kk = f"Kind::Msg({index[ref]})"
            else:
                kk = "Kind::" + kinds[kind]
            flags = [n for n, on in (("OMITEMPTY", info["omitempty"]), ("POINTER", info["pointer"]),
                                     ("INLINE", info["inline"] or info["json"] == "")) if on]
            fl.append(f"Field::new({tag}, {info['json']!r}, {kk}, Rep::{rep}, {'|'.join(flags) or '0'})"
                      .replace("'", '"'))
        lines.append(f'    Message {{ name: "{full}", shape: Shape::{shape}, fields: &[')
        for f in fl:
            lines.append(f"        {f},")
        lines.append("    ]},")
    lines.append("];")
    open(OUT, "w").write("\n".join(lines) + "\n")
    print(len(order), "messages", sum(len(e[2]) for e in entries.values()), "fields")


main()
