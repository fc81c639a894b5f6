"""Extract list/map merge strategies from k8s-openapi's DeepMerge impls into a Rust data table.

Usage: python3 gen_merge_table.py ~/.cargo/registry/src/*/k8s-openapi-0.29.0 > merge_table.rs && cargo fmt
"""
import glob, re, sys

root = sys.argv[1]
out = []
for path in sorted(glob.glob(root + "/src/v1_33/**/*.rs", recursive=True)):
    src = open(path).read()
    m = re.search(r'fn schema_name\(\) -> std::borrow::Cow<\'static, str> \{\s*"([^"]+)"', src)
    if not m:
        continue
    name = m.group(1)
    for mm in re.finditer(r'merge_strategies::(list|map)::(atomic|set|map|granular)\(\s*&mut self\.([a-z0-9_]+)', src):
        group, kind, field = mm.groups()
        if kind == "granular":
            continue
        keys = []
        if group == "list" and kind == "map":
            tail = src[mm.end():mm.end() + 600]
            arr = re.search(r'&\[(.*?)\],\s*\|current_item', tail, re.S)
            keys = re.findall(r'lhs\.([a-z0-9_]+) ==', arr.group(1))
        field = field.rstrip("_")
        if group == "map":
            strat = "S::MapAtomic"
        elif kind == "atomic":
            strat = "S::Atomic"
        elif kind == "set":
            strat = "S::Set"
        else:
            strat = "S::Map(&[" + ", ".join('"%s"' % k.rstrip("_") for k in keys) + "])"
        out.append('    ("%s", "%s", %s),' % (name, field, strat))

print("//! Merge metadata (list/map types) extracted from k8s-openapi's `DeepMerge` impls by")
print("//! `gen_merge_table.py` (beside this file); field and key names are Rust snake_case, matched at runtime.")
print()
print("use super::Strategy as S;")
print()
print("/// (definition, rust field name, strategy) for every non-default merge strategy.")
print("pub(super) const MERGE_TABLE: &[(&str, &str, S)] = &[")
print("\n".join(out))
print("];")
