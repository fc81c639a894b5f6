"""Derive the table of built-in APIs that kube-apiserver serves by default, for one kube minor.

Usage:
  python3 gen_kube_api.py DISCOVERY_DIR K8S_OPENAPI_DIR MINOR > kube-MINOR.tsv
  e.g. python3 gen_kube_api.py /tmp/kube-discovery ~/.cargo/registry/src/*/k8s-openapi-0.29.0 1.33 > kube-1.33.tsv

DISCOVERY_DIR holds kube's legacy discovery documents, one APIResourceList per group-version, named as
kubernetes/kubernetes names them under api/discovery/ (`api__v1.json`, `apis__apps__v1.json`, ...), or as
`kubectl get --raw /apis/apps/v1` prints them from a real kube-apiserver. They give what only kube's
registry knows: verbs, short names, categories, subresources and storage version hashes.

K8S_OPENAPI_DIR is the k8s-openapi crate's source; its `src/v1_<minor>/` module is generated from that
kube minor's OpenAPI document, so a resource is kept only if that module has it. That cuts what the
discovery documents hold for other minors; a resource of the minor that the documents lack gets kube's
defaults for a stored type (every verb, a status subresource when the type has a status). Only GA versions are kept: since 1.24 kube enables no new
beta API by default, and the legacy betas that were on by default are gone by 1.32.

One row per resource or subresource, tab-separated, `-` for an empty field:
  group  version  name  kind  kind-group/version  scope  verbs  short-names  categories  storage-version-hash
`kind-group/version` is set only when a subresource answers a kind of another group (pods/eviction: policy/v1).
"""
import base64, glob, hashlib, json, os, re, sys

discovery_dir, openapi_dir, minor = sys.argv[1], sys.argv[2], sys.argv[3]
module = os.path.join(openapi_dir, "src", "v" + minor.replace(".", "_"))

# Resources of this minor's OpenAPI: (apiVersion, kind, plural) -> (namespaced, has a status field).
served = {}
for path in glob.glob(module + "/**/*.rs", recursive=True):
    src = open(path).read()
    av = re.search(r'const API_VERSION: &\'static str = "([^"]+)"', src)
    kind = re.search(r'const KIND: &\'static str = "([^"]+)"', src)
    seg = re.search(r'const URL_PATH_SEGMENT: &\'static str = "([^"]+)"', src)
    scope = re.search(r'type Scope = crate::(\w+);', src)
    if av and kind and seg and scope and scope.group(1) != "SubResourceScope":
        served[(av.group(1), kind.group(1), seg.group(1))] = (
            scope.group(1) == "NamespaceResourceScope",
            re.search(r"^    pub status: ", src, re.M) is not None,
        )
if not served:
    sys.exit(f"no resources found under {module}")


def is_ga(version):
    return re.fullmatch(r"v[0-9]+", version) is not None


def hash_of(group, version, kind):
    """kube's storageVersionHash: base64 of the first 8 bytes of sha256("group/version/kind")."""
    return base64.b64encode(hashlib.sha256(f"{group}/{version}/{kind}".encode()).digest()[:8]).decode()


def verbs_of(r):
    verbs = list(r["verbs"])
    # Every store-backed list is watchable in kube (componentstatuses, answered by probes, is the one
    # exception); some published discovery snapshots drop `watch`, so it is restored here.
    if "list" in verbs and "watch" not in verbs and r["name"] != "componentstatuses":
        verbs.append("watch")
    return verbs


# Subresources of the core group by the first minor that serves them by default, where discovery documents
# of other minors disagree (k8s-openapi has no subresource list to check against): name -> (first minor,
# kind, verbs). pods/resize is beta and on by default from 1.33; pods/checkpoint is not in 1.33.
CORE_SUBRESOURCES = {
    "pods/resize": (33, "Pod", "get,patch,update"),
    "pods/checkpoint": (99, "PodCheckpointOptions", "create"),
}
minor_number = int(minor.split(".")[1])

ALL = ["create", "delete", "deletecollection", "get", "list", "patch", "update", "watch"]
rows = []
documented = set()
for path in sorted(glob.glob(os.path.join(discovery_dir, "*.json"))):
    doc = json.load(open(path))
    if doc.get("kind") != "APIResourceList":
        continue
    gv = doc["groupVersion"]
    group, version = gv.split("/") if "/" in gv else ("", gv)
    if not is_ga(version):
        continue
    resources = doc["resources"]
    kept = {r["name"] for r in resources if "/" not in r["name"] and (gv, r["kind"], r["name"]) in served}
    documented |= {(gv, r["kind"], r["name"]) for r in resources}
    for r in resources:
        name = r["name"]
        if name.split("/")[0] not in kept:
            continue
        if group == "" and CORE_SUBRESOURCES.get(name, (0,))[0] > minor_number:
            continue
        sub_gv = ""
        if "/" in name and (r.get("group") or r.get("version")):
            sub_gv = f'{r.get("group", "")}/{r.get("version", "")}'
        rows.append([
            group or "-",
            version,
            name,
            r["kind"],
            sub_gv or "-",
            "Namespaced" if r["namespaced"] else "Cluster",
            ",".join(verbs_of(r)) or "-",
            ",".join(r.get("shortNames", [])) or "-",
            ",".join(r.get("categories", [])) or "-",
            r.get("storageVersionHash") or "-",
        ])

# What this minor serves that the discovery documents at hand predate: kube's defaults for a stored type.
for (gv, kind, plural), (namespaced, has_status) in sorted(served.items()):
    group, version = gv.split("/") if "/" in gv else ("", gv)
    if not is_ga(version) or (gv, kind, plural) in documented:
        continue
    scope = "Namespaced" if namespaced else "Cluster"
    rows.append([group or "-", version, plural, kind, "-", scope, ",".join(ALL), "-", "-", hash_of(group, version, kind)])
    if has_status:
        rows.append([group or "-", version, plural + "/status", kind, "-", scope, "get,patch,update", "-", "-", "-"])

for name, (first, kind, verbs) in CORE_SUBRESOURCES.items():
    if first <= minor_number and not any(r[0] == "-" and r[2] == name for r in rows):
        rows.append(["-", "v1", name, kind, "-", "Namespaced", verbs, "-", "-", "-"])

rows.sort(key=lambda r: (r[0] != "-", r[0], r[1], r[2]))
print(f"# The built-in APIs of kube-apiserver {minor}, served by default. Generated by gen_kube_api.py; do not edit.")
print("# group\tversion\tname\tkind\tkind-group/version\tscope\tverbs\tshort-names\tcategories\tstorage-version-hash")
for row in rows:
    print("\t".join(row))
