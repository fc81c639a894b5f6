//! What kube checks of a pod spec's containers beyond their names, images, ports, environment and
//! mounts (kube 1.33's `validateContainerCommon`, `validateContainers`, `validateInitContainers` and
//! `ValidatePodSpec`): pull and termination-message policies, restart policies of regular and init
//! containers, probes and lifecycle hooks and their handlers, `envFrom`, resize policies, host ports
//! taken twice, tolerations, and the pod's own names, deadline, priority, DNS config and host
//! aliases.

use std::sync::LazyLock;

use regex::Regex;

use super::*;

/// kube's words for an IP of its older fields, which it reads as Go's `ParseIPSloppy` does.
const NOT_IP: &str = "must be a valid IP address, (e.g. 10.9.8.7 or 2001:db8::ffff)";

// apimachinery's `dns1123SubdomainFmtWithUnderscore`, for DNS search domains (1.33 relaxes them so).
const SEARCH_FMT: &str = "_?[a-z0-9]([-_a-z0-9]*[a-z0-9])?(\\._?[a-z0-9]([-_a-z0-9]*[a-z0-9])?)*";
static SEARCH: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"^_?[a-z0-9]([-_a-z0-9]*[a-z0-9])?(\._?[a-z0-9]([-_a-z0-9]*[a-z0-9])?)*$").unwrap());

const PULL_POLICIES: &[&str] = &["Always", "IfNotPresent", "Never"];
const NEGATIVE: &str = "must be greater than or equal to 0";
const INIT_WITHOUT_RESTART: &str = "may not be set for init containers without restartPolicy=Always";

/// A string field that must be one of `supported` (kube's order in its words): `Required` when empty.
/// Left out, it is not checked (defaults fill it before kube validates).
fn policy(container: &Value, field: &str, at: &str, supported: &[&str], causes: &mut Vec<Cause>) {
    match container.get(field) {
        None | Some(Value::Null) => {}
        Some(Value::String(s)) if s.is_empty() => required(causes, format!("{at}.{field}")),
        Some(v) if v.as_str().is_some_and(|s| supported.contains(&s)) => {}
        Some(v) => not_supported(causes, format!("{at}.{field}"), v, supported),
    }
}

/// The checks of a pod spec's containers and of its own fields. `pod`: the spec is a Pod's, not a
/// template's (a few checks hold for pods alone).
pub(super) fn pod_spec_rest(spec: &Map<String, Value>, path: &Path, pod: bool, causes: &mut Vec<Cause>) {
    let grace = spec.get("terminationGracePeriodSeconds").and_then(Value::as_i64);
    let restart = spec.get("restartPolicy").and_then(Value::as_str).unwrap_or_default();
    let host_network = spec.get("hostNetwork") == Some(&Value::Bool(true));
    let mut host_ports = HashSet::new();
    for (list, init) in [("containers", false), ("initContainers", true), ("ephemeralContainers", false)] {
        for (i, c) in spec.get(list).and_then(Value::as_array).into_iter().flatten().enumerate() {
            let at = format!("{}[{i}]", path.child(list));
            policy(c, "terminationMessagePolicy", &at, &["File", "FallbackToLogsOnError"], causes);
            env_from(c, &at, causes);
            policy(c, "imagePullPolicy", &at, PULL_POLICIES, causes);
            resize_policy(c, &at, restart, causes);
            if list == "ephemeralContainers" {
                // The rest is of fields an ephemeral container may not set (`ephemeral_containers`),
                // and its image is a pod's, in a template too.
                untrimmed_image(c, &at, causes);
                continue;
            }
            let restart_always = match c.get("restartPolicy").filter(|r| !r.is_null()) {
                None => false,
                Some(_) if !init => {
                    forbidden(causes, &format!("{at}.restartPolicy"), "may not be set for non-init containers");
                    false
                }
                Some(r) if r == "Always" => true,
                Some(r) => {
                    not_supported(causes, format!("{at}.restartPolicy"), r, &["Always"]);
                    false
                }
            };
            // An init container's host ports are checked against its own alone, and kube reports them
            // at the first init container's path.
            let (ports_at, mut own) =
                if init { (format!("{}[0]", path.child(list)), HashSet::new()) } else { (at.clone(), HashSet::new()) };
            let taken = if init { &mut own } else { &mut host_ports };
            for (p, port) in list_of(c, "ports").iter().enumerate() {
                let host_port = port["hostPort"].as_i64().unwrap_or(0);
                if host_port != 0 {
                    let protocol = text(port, "protocol");
                    let key = format!("{protocol}/{}/{host_port}", text(port, "hostIP"));
                    if !taken.insert(key.clone()) {
                        duplicate(causes, &format!("{ports_at}.ports[{p}].hostPort"), &key);
                    }
                }
            }
            if !init || restart_always {
                if let Some(lifecycle) = c.get("lifecycle").filter(|l| !l.is_null()) {
                    for hook in ["postStart", "preStop"] {
                        let sleep = &lifecycle[hook]["sleep"];
                        if let (Some(seconds), Some(grace)) = (sleep["seconds"].as_i64(), grace) {
                            if seconds < 0 || seconds > grace {
                                let why = format!(
                                    "must be non-negative and less than terminationGracePeriodSeconds ({grace})"
                                );
                                invalid(causes, format!("{at}.lifecycle.{hook}.sleep"), seconds.to_string(), &why);
                            }
                        }
                    }
                }
                for probe in ["livenessProbe", "readinessProbe", "startupProbe"] {
                    if let Some(p) = c.get(probe).filter(|p| !p.is_null()) {
                        check_probe(p, probe, &format!("{at}.{probe}"), causes);
                    }
                }
            } else {
                for field in ["lifecycle", "livenessProbe", "readinessProbe", "startupProbe"] {
                    if c.get(field).is_some_and(|v| !v.is_null()) {
                        forbidden(causes, &format!("{at}.{field}"), INIT_WITHOUT_RESTART);
                    }
                }
            }
            if host_network && !init {
                for (p, port) in list_of(c, "ports").iter().enumerate() {
                    let (hp, cp) =
                        (port["hostPort"].as_i64().unwrap_or(0), port["containerPort"].as_i64().unwrap_or(0));
                    if (pod || hp != 0) && hp != cp {
                        let why = "must match `containerPort` when `hostNetwork` is true";
                        invalid(causes, format!("{at}.ports[{p}].hostPort"), hp.to_string(), why);
                    }
                }
            }
            if pod {
                untrimmed_image(c, &at, causes);
            }
        }
    }
    pod_names(spec, path, causes);
    dns_config(spec, path, causes);
    for (i, alias) in spec.get("hostAliases").and_then(Value::as_array).into_iter().flatten().enumerate() {
        let at = format!("{}[{i}]", path.child("hostAliases"));
        let ip = text(alias, "ip");
        if sloppy_ip(ip).is_none() {
            invalid(causes, format!("{at}.ip"), format!("{ip:?}"), NOT_IP);
        }
        for (j, host) in list_of(alias, "hostnames").iter().enumerate() {
            let host = host.as_str().unwrap_or_default();
            for why in meta::dns1123_subdomain_errors(host) {
                invalid(causes, format!("{at}.hostnames[{j}]"), format!("{host:?}"), &why);
            }
        }
    }
}

/// kube's `validateContainerOnlyForPod`: a pod's containers' images (not a template's, where some
/// tools put a blank placeholder) have no surrounding whitespace.
fn untrimmed_image(c: &Value, at: &str, causes: &mut Vec<Cause>) {
    let image = text(c, "image");
    if image.trim() != image {
        let why = "must not have leading or trailing whitespace";
        invalid(causes, format!("{at}.image"), format!("{image:?}"), why);
    }
}

/// An ephemeral container's own rules (kube's `validateEphemeralContainers`): a name unique among all
/// the pod's containers, a target that is a container or init container, none of the fields kube's
/// allow-list leaves out (ports, resources, probes, hooks, restart and resize policies), and no
/// sub-paths in its mounts.
pub(super) fn ephemeral_containers(spec: &Map<String, Value>, path: &Path, causes: &mut Vec<Cause>) {
    let list = spec.get("ephemeralContainers").and_then(Value::as_array).map_or(&[][..], Vec::as_slice);
    if list.is_empty() {
        return;
    }
    let names = |field: &str| spec.get(field).and_then(Value::as_array).into_iter().flatten();
    let others: HashSet<&str> = names("containers").chain(names("initContainers")).map(|c| text(c, "name")).collect();
    let mut all = others.clone();
    let list_at = path.child("ephemeralContainers");
    for (i, c) in list.iter().enumerate() {
        let at = format!("{list_at}[{i}]");
        let name = text(c, "name");
        if !all.insert(name) {
            duplicate(causes, &format!("{at}.name"), name);
        }
        let target = text(c, "targetContainerName");
        if !target.is_empty() && !others.contains(target) {
            push(
                causes,
                cause("FieldValueNotFound", &format!("{at}.targetContainerName"), format!("Not found: {target:?}")),
            );
        }
        // In the struct's order. A struct-valued field is set when it differs from its zero value: an
        // empty `resources` is not set, an empty list is.
        for field in [
            "ports",
            "resources",
            "resizePolicy",
            "restartPolicy",
            "livenessProbe",
            "readinessProbe",
            "startupProbe",
            "lifecycle",
        ] {
            let is_set = match c.get(field) {
                None | Some(Value::Null) => false,
                Some(Value::Object(m)) if field == "resources" => m.values().any(|v| !v.is_null()),
                Some(_) => true,
            };
            if is_set {
                forbidden(causes, &format!("{at}.{field}"), "cannot be set for an Ephemeral Container");
            }
        }
        for (m, mount) in list_of(c, "volumeMounts").iter().enumerate() {
            for field in ["subPath", "subPathExpr"] {
                if !text(mount, field).is_empty() {
                    forbidden(
                        causes,
                        &format!("{at}.volumeMounts[{m}].{field}"),
                        "cannot be set for an Ephemeral Container",
                    );
                }
            }
        }
    }
}

/// A pod's DNS config (kube's `validatePodDNSConfig`, with 1.33's relaxed search domains): required
/// with the `None` policy, at most 3 name servers that are IPs, at most 32 search domains of 2,048
/// characters in all, named options.
fn dns_config(spec: &Map<String, Value>, path: &Path, causes: &mut Vec<Cause>) {
    let at = path.child("dnsConfig");
    let config = spec.get("dnsConfig").filter(|c| !c.is_null());
    let nameservers = config.map_or(&[][..], |c| list_of(c, "nameservers"));
    if spec.get("dnsPolicy").and_then(Value::as_str) == Some("None") {
        let Some(_) = config else {
            return required_why(causes, &at, "must provide `dnsConfig` when `dnsPolicy` is None");
        };
        if nameservers.is_empty() {
            let why = "must provide at least one DNS nameserver when `dnsPolicy` is None";
            return required_why(causes, &format!("{at}.nameservers"), why);
        }
    }
    let Some(config) = config else { return };
    if nameservers.len() > 3 {
        let why = "must not have more than 3 nameservers";
        invalid(causes, format!("{at}.nameservers"), go_strings("string", nameservers), why);
    }
    for (i, ns) in nameservers.iter().enumerate() {
        let ns = ns.as_str().unwrap_or_default();
        if sloppy_ip(ns).is_none() {
            invalid(causes, format!("{at}.nameservers[{i}]"), format!("{ns:?}"), NOT_IP);
        }
    }
    let searches = list_of(config, "searches");
    if searches.len() > 32 {
        let why = "must not have more than 32 search paths";
        invalid(causes, format!("{at}.searches"), go_strings("string", searches), why);
    }
    let chars: usize =
        searches.iter().map(|s| s.as_str().map_or(0, str::len)).sum::<usize>() + searches.len().saturating_sub(1);
    if chars > 2048 {
        let why = "must not have more than 2048 characters (including spaces) in the search list";
        invalid(causes, format!("{at}.searches"), go_strings("string", searches), why);
    }
    for (i, search) in searches.iter().enumerate() {
        let search = search.as_str().unwrap_or_default();
        if search == "." {
            continue;
        }
        let trimmed = search.strip_suffix('.').unwrap_or(search);
        let here = format!("{at}.searches[{i}]");
        if trimmed.len() > 253 {
            invalid(causes, here.clone(), format!("{trimmed:?}"), "must be no more than 253 characters");
        }
        if !SEARCH.is_match(trimmed) {
            let why = format!("a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '_', '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '{SEARCH_FMT}')");
            invalid(causes, here, format!("{trimmed:?}"), &why);
        }
    }
    for (i, option) in list_of(config, "options").iter().enumerate() {
        if text(option, "name").is_empty() {
            required_why(causes, &format!("{at}.options[{i}]"), "must not be empty");
        }
    }
}

/// The items of a list field, none when absent.
fn list_of<'a>(v: &'a Value, field: &str) -> &'a [Value] {
    v[field].as_array().map_or(&[][..], Vec::as_slice)
}

/// A probe's numbers (kube's `validateProbe` and the liveness, readiness and startup rules).
fn check_probe(probe: &Value, kind: &str, at: &str, causes: &mut Vec<Cause>) {
    for field in ["initialDelaySeconds", "timeoutSeconds", "periodSeconds", "successThreshold", "failureThreshold"] {
        if let Some(n) = probe[field].as_i64().filter(|n| *n < 0) {
            invalid(causes, format!("{at}.{field}"), n.to_string(), NEGATIVE);
        }
    }
    let grace = probe["terminationGracePeriodSeconds"].as_i64();
    if let Some(n) = grace.filter(|n| *n <= 0) {
        invalid(causes, format!("{at}.terminationGracePeriodSeconds"), n.to_string(), "must be greater than 0");
    }
    match kind {
        "readinessProbe" => {
            if let Some(n) = grace {
                let why = "must not be set for readinessProbes";
                invalid(causes, format!("{at}.terminationGracePeriodSeconds"), n.to_string(), why);
            }
        }
        _ => {
            if let Some(n) = probe["successThreshold"].as_i64().filter(|n| *n != 1) {
                invalid(causes, format!("{at}.successThreshold"), n.to_string(), "must be 1");
            }
        }
    }
}

/// A container's `envFrom` (kube's `ValidateEnvFrom`): a prefix that is a variable's name, and one
/// named source each (kube reports the count at the list's path).
fn env_from(container: &Value, at: &str, causes: &mut Vec<Cause>) {
    let list_at = format!("{at}.envFrom");
    for (i, source) in list_of(container, "envFrom").iter().enumerate() {
        let here = format!("{list_at}[{i}]");
        let prefix = text(source, "prefix");
        if prefix.bytes().any(|b| !(0x20..=0x7e).contains(&b) || b == b'=') {
            let why =
                "a valid environment variable name must consist only of printable ASCII characters other than '='";
            invalid(causes, format!("{here}.prefix"), format!("{prefix:?}"), why);
        }
        let mut sources = 0;
        for kind in ["configMapRef", "secretRef"] {
            let Some(reference) = source.get(kind).filter(|r| !r.is_null()) else { continue };
            sources += 1;
            match text(reference, "name") {
                "" => required(causes, format!("{here}.{kind}.name")),
                // A name kube may append to (a prefix), checked as kube's `maskTrailingDash` leaves it:
                // its last two characters made one letter when it ends with '-'.
                name => {
                    let masked = match name.len() > 1 && name.ends_with('-') {
                        true => name.get(..name.len() - 2).map_or_else(|| name.to_string(), |n| format!("{n}a")),
                        false => name.to_string(),
                    };
                    for why in meta::dns1123_subdomain_errors(&masked) {
                        invalid(causes, format!("{here}.{kind}.name"), format!("{name:?}"), &why);
                    }
                }
            }
        }
        match sources {
            0 => invalid(causes, list_at.clone(), "\"\"".into(), "must specify one of: `configMapRef` or `secretRef`"),
            1 => {}
            _ => {
                invalid(causes, list_at.clone(), "\"\"".into(), "may not have more than one field specified at a time")
            }
        }
    }
}

/// A container's resize policies (kube's `validateResizePolicy`): CPU or memory once each, a known
/// restart policy, and none that restarts a container of a pod that never restarts.
fn resize_policy(container: &Value, at: &str, pod_restart: &str, causes: &mut Vec<Cause>) {
    let list_at = format!("{at}.resizePolicy");
    let mut seen = HashSet::new();
    for (i, p) in list_of(container, "resizePolicy").iter().enumerate() {
        let (resource, restart) = (text(p, "resourceName"), text(p, "restartPolicy"));
        if !seen.insert(resource) {
            duplicate(causes, &format!("{list_at}[{i}]"), resource);
        }
        match resource {
            "cpu" | "memory" => {}
            "" => required(causes, list_at.clone()),
            other => not_supported(causes, list_at.clone(), &Value::String(other.into()), &["cpu", "memory"]),
        }
        match restart {
            "NotRequired" | "RestartContainer" => {}
            "" => required(causes, list_at.clone()),
            other => not_supported(
                causes,
                list_at.clone(),
                &Value::String(other.into()),
                &["NotRequired", "RestartContainer"],
            ),
        }
        if pod_restart == "Never" && restart != "NotRequired" {
            let why = "must be 'NotRequired' when `restartPolicy` is 'Never'";
            invalid(causes, list_at.clone(), format!("{restart:?}"), why);
        }
    }
}

/// The pod's own names and numbers (kube's `ValidatePodSpec`): a service account, node, priority class
/// and runtime class named as objects are, a host name and subdomain that are DNS labels, a deadline
/// of 1 to 2^31-1 seconds, a known preemption policy, readiness gates' qualified names.
fn pod_names(spec: &Map<String, Value>, path: &Path, causes: &mut Vec<Cause>) {
    let s = |field: &str| spec.get(field).and_then(Value::as_str).unwrap_or_default();
    for field in ["serviceAccountName", "nodeName", "priorityClassName"] {
        let name = s(field);
        if !name.is_empty() {
            for why in meta::dns1123_subdomain_errors(name) {
                invalid(causes, path.child(field), format!("{name:?}"), &why);
            }
        }
    }
    if let Some(deadline) = spec.get("activeDeadlineSeconds").and_then(Value::as_i64) {
        if !(1..=i64::from(i32::MAX)).contains(&deadline) {
            let why = "must be between 1 and 2147483647, inclusive";
            invalid(causes, path.child("activeDeadlineSeconds"), deadline.to_string(), why);
        }
    }
    for field in ["hostname", "subdomain"] {
        let name = s(field);
        if !name.is_empty() {
            dns_label(causes, path.child(field), name);
        }
    }
    if let Some(class) = spec.get("runtimeClassName").and_then(Value::as_str) {
        for why in meta::dns1123_subdomain_errors(class) {
            invalid(causes, path.child("runtimeClassName"), format!("{class:?}"), &why);
        }
    }
    if let Some(p) = spec.get("preemptionPolicy").filter(|p| !p.is_null()) {
        match p.as_str() {
            Some("PreemptLowerPriority" | "Never") => {}
            Some("") => required(causes, path.child("preemptionPolicy")),
            _ => not_supported(causes, path.child("preemptionPolicy"), p, &["PreemptLowerPriority", "Never"]),
        }
    }
    for (i, gate) in spec.get("readinessGates").and_then(Value::as_array).into_iter().flatten().enumerate() {
        let condition = text(gate, "conditionType");
        for why in meta::qualified_name_errors(condition) {
            let at = format!("{}[{i}].conditionType", path.child("readinessGates"));
            invalid(causes, at, format!("{condition:?}"), &why);
        }
    }
}

/// A toleration (kube's `ValidateTolerations`): a label key if any, an operator that fits its key and
/// value, `tolerationSeconds` only for `NoExecute`, a known effect.
pub(super) fn toleration(map: &Map<String, Value>, path: &Path, causes: &mut Vec<Cause>) {
    let s = |field: &str| map.get(field).and_then(Value::as_str).unwrap_or_default();
    let (key, operator, value, effect) = (s("key"), s("operator"), s("value"), s("effect"));
    if !key.is_empty() {
        label_key(causes, &path.child("key"), key);
    }
    if key.is_empty() && operator != "Exists" {
        let why = "operator must be Exists when `key` is empty, which means \"match all values and all keys\"";
        invalid(causes, path.child("operator"), format!("{operator:?}"), why);
    }
    if map.get("tolerationSeconds").is_some_and(|t| !t.is_null()) && effect != "NoExecute" {
        let why = "effect must be 'NoExecute' when `tolerationSeconds` is set";
        invalid(causes, path.child("effect"), format!("{effect:?}"), why);
    }
    match operator {
        "Equal" | "" => {
            let errs = meta::label_value_errors(value);
            if !errs.is_empty() {
                invalid(causes, path.child("operator"), format!("{value:?}"), &errs.join(";"));
            }
        }
        "Exists" => {
            if !value.is_empty() {
                let why = "value must be empty when `operator` is 'Exists'";
                invalid(causes, path.child("operator"), format!("{value:?}"), why);
            }
        }
        other => not_supported(causes, path.child("operator"), &Value::String(other.into()), &["Equal", "Exists"]),
    }
    const EFFECTS: &[&str] = &["NoSchedule", "PreferNoSchedule", "NoExecute"];
    if !effect.is_empty() && !EFFECTS.contains(&effect) {
        not_supported(causes, path.child("effect"), &Value::String(effect.into()), EFFECTS);
    }
}

/// A probe's or hook's action by its own fields (kube's `validateExecAction`, `validateHTTPGetAction`,
/// `validateTCPSocketAction`, `validateGRPCAction`).
pub(super) fn action(name: &str, map: &Map<String, Value>, path: &Path, causes: &mut Vec<Cause>) {
    match name {
        "core.v1.ExecAction" if is_empty(map.get("command")) => required(causes, path.child("command")),
        "core.v1.HTTPGetAction" => {
            if map.get("path").and_then(Value::as_str) == Some("") {
                required(causes, path.child("path"));
            }
            port_num_or_name(map.get("port"), &path.child("port"), causes);
            if let Some(scheme) = map.get("scheme").filter(|s| !s.is_null()) {
                if !scheme.as_str().is_some_and(|s| s == "HTTP" || s == "HTTPS") {
                    not_supported(causes, path.child("scheme"), scheme, &["HTTP", "HTTPS"]);
                }
            }
            for header in map.get("httpHeaders").and_then(Value::as_array).into_iter().flatten() {
                let name = text(header, "name");
                if name.is_empty() || !name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-') {
                    let why = "a valid HTTP header must consist of alphanumeric characters or '-' (e.g. 'X-Header-Name', regex used for validation is '[-A-Za-z0-9]+')";
                    invalid(causes, path.child("httpHeaders"), format!("{name:?}"), why);
                }
            }
        }
        "core.v1.TCPSocketAction" => port_num_or_name(map.get("port"), &path.child("port"), causes),
        "core.v1.GRPCAction" => port_num_or_name(map.get("port"), &path.child("port"), causes),
        _ => {}
    }
}

/// A port given by number or by name (kube's `ValidatePortNumOrName`).
fn port_num_or_name(port: Option<&Value>, at: &str, causes: &mut Vec<Cause>) {
    match port {
        Some(Value::Number(n)) => {
            let n = n.as_i64().unwrap_or(0);
            if !(1..=65535).contains(&n) {
                invalid(causes, at.into(), n.to_string(), "must be between 1 and 65535, inclusive");
            }
        }
        Some(Value::String(name)) => {
            for why in port_name_errors(name) {
                invalid(causes, at.into(), format!("{name:?}"), why);
            }
        }
        _ => invalid(causes, at.into(), "0".into(), "must be between 1 and 65535, inclusive"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn messages(api_version: &str, kind: &str, obj: Value) -> Vec<String> {
        testing::lines(errors(api_version, kind, &obj, None))
    }

    #[test]
    fn containers_policies_probes_hooks_and_pod_fields_as_kube_checks_them() {
        let a = json!({"name": "a", "image": " x", "imagePullPolicy": "Alway", "terminationMessagePolicy": "",
            "restartPolicy": "Always",
            "livenessProbe": {"exec": {"command": []}, "initialDelaySeconds": -1, "successThreshold": 2},
            "readinessProbe": {"httpGet": {"path": "", "port": 70000, "scheme": "FTP",
                "httpHeaders": [{"name": "Bad Header", "value": "v"}]}, "terminationGracePeriodSeconds": 5},
            "startupProbe": {"tcpSocket": {"port": 0}, "terminationGracePeriodSeconds": 0, "successThreshold": 1},
            "lifecycle": {"preStop": {"sleep": {"seconds": 40}}},
            "ports": [{"containerPort": 80, "hostPort": 8080, "protocol": "TCP"}],
            "envFrom": [{"prefix": "A=", "configMapRef": {"name": "cm"}, "secretRef": {"name": "s"}}, {}],
            "resizePolicy": [{"resourceName": "cpu", "restartPolicy": "RestartContainer"},
                {"resourceName": "cpu", "restartPolicy": "Sometimes"}]});
        let b =
            json!({"name": "b", "image": "x", "ports": [{"containerPort": 8080, "hostPort": 8080, "protocol": "TCP"}]});
        let spec = json!({"containers": [a, b], "terminationGracePeriodSeconds": 30, "restartPolicy": "Never",
            "hostNetwork": true,
            "initContainers": [
                {"name": "i", "image": "x", "restartPolicy": "OnFailure", "livenessProbe": {"exec": {"command": ["x"]}}},
                {"name": "s", "image": "x", "restartPolicy": "Always", "startupProbe": {"grpc": {"port": 0}}}],
            "hostname": "Bad_Host", "serviceAccountName": "Bad SA", "activeDeadlineSeconds": 0,
            "preemptionPolicy": "Sometimes", "readinessGates": [{"conditionType": "bad gate!"}],
            "tolerations": [{"operator": "Equal", "value": "x"},
                {"key": "k", "operator": "Exists", "value": "v", "effect": "Sometimes", "tolerationSeconds": 5}],
            "dnsPolicy": "None", "dnsConfig": {"nameservers": ["1.1.1.1", "2.2.2.2", "3.3.3.3", "nope"],
                "searches": ["ns.svc.cluster.local.", "Bad_Domain", "."], "options": [{"name": ""}]},
            "hostAliases": [{"ip": "10.0.0.300", "hostnames": ["Bad Host"]}]});
        let got = messages("v1", "Pod", json!({"metadata": {"name": "p"}, "spec": spec}));
        let label = meta::validate_dns1123_label("Bad_Host").unwrap_err();
        let subdomain = meta::validate_dns1123_subdomain("Bad SA").unwrap_err();
        let mut want: Vec<String> = [
            "spec.containers[0].terminationMessagePolicy: Required value",
            "spec.containers[0].envFrom[0].prefix: Invalid value: \"A=\": a valid environment variable name must consist only of printable ASCII characters other than '='",
            "spec.containers[0].envFrom: Invalid value: \"\": may not have more than one field specified at a time",
            "spec.containers[0].envFrom: Invalid value: \"\": must specify one of: `configMapRef` or `secretRef`",
            "spec.containers[0].imagePullPolicy: Unsupported value: \"Alway\": supported values: \"Always\", \"IfNotPresent\", \"Never\"",
            "spec.containers[0].resizePolicy: Invalid value: \"RestartContainer\": must be 'NotRequired' when `restartPolicy` is 'Never'",
            "spec.containers[0].resizePolicy[1]: Duplicate value: \"cpu\"",
            "spec.containers[0].resizePolicy: Unsupported value: \"Sometimes\": supported values: \"NotRequired\", \"RestartContainer\"",
            "spec.containers[0].resizePolicy: Invalid value: \"Sometimes\": must be 'NotRequired' when `restartPolicy` is 'Never'",
            "spec.containers[0].restartPolicy: Forbidden: may not be set for non-init containers",
            "spec.containers[0].lifecycle.preStop.sleep: Invalid value: 40: must be non-negative and less than terminationGracePeriodSeconds (30)",
            "spec.containers[0].livenessProbe.initialDelaySeconds: Invalid value: -1: must be greater than or equal to 0",
            "spec.containers[0].livenessProbe.successThreshold: Invalid value: 2: must be 1",
            "spec.containers[0].livenessProbe.exec.command: Required value",
            "spec.containers[0].readinessProbe.terminationGracePeriodSeconds: Invalid value: 5: must not be set for readinessProbes",
            "spec.containers[0].readinessProbe.httpGet.path: Required value",
            "spec.containers[0].readinessProbe.httpGet.port: Invalid value: 70000: must be between 1 and 65535, inclusive",
            "spec.containers[0].readinessProbe.httpGet.scheme: Unsupported value: \"FTP\": supported values: \"HTTP\", \"HTTPS\"",
            "spec.containers[0].readinessProbe.httpGet.httpHeaders: Invalid value: \"Bad Header\": a valid HTTP header must consist of alphanumeric characters or '-' (e.g. 'X-Header-Name', regex used for validation is '[-A-Za-z0-9]+')",
            "spec.containers[0].startupProbe.terminationGracePeriodSeconds: Invalid value: 0: must be greater than 0",
            "spec.containers[0].startupProbe.tcpSocket.port: Invalid value: 0: must be between 1 and 65535, inclusive",
            "spec.containers[0].ports[0].hostPort: Invalid value: 8080: must match `containerPort` when `hostNetwork` is true",
            "spec.containers[0].image: Invalid value: \" x\": must not have leading or trailing whitespace",
            "spec.containers[1].ports[0].hostPort: Duplicate value: \"TCP//8080\"",
            "spec.initContainers[0].restartPolicy: Unsupported value: \"OnFailure\": supported values: \"Always\"",
            "spec.initContainers[0].livenessProbe: Forbidden: may not be set for init containers without restartPolicy=Always",
            "spec.initContainers[1].startupProbe.grpc.port: Invalid value: 0: must be between 1 and 65535, inclusive",
            "spec.activeDeadlineSeconds: Invalid value: 0: must be between 1 and 2147483647, inclusive",
            "spec.preemptionPolicy: Unsupported value: \"Sometimes\": supported values: \"PreemptLowerPriority\", \"Never\"",
            "spec.tolerations[0].operator: Invalid value: \"Equal\": operator must be Exists when `key` is empty, which means \"match all values and all keys\"",
            "spec.tolerations[1].effect: Invalid value: \"Sometimes\": effect must be 'NoExecute' when `tolerationSeconds` is set",
            "spec.tolerations[1].operator: Invalid value: \"v\": value must be empty when `operator` is 'Exists'",
            "spec.tolerations[1].effect: Unsupported value: \"Sometimes\": supported values: \"NoSchedule\", \"PreferNoSchedule\", \"NoExecute\"",
        ]
        .map(String::from)
        .to_vec();
        want.push(format!("spec.hostname: Invalid value: \"Bad_Host\": {label}"));
        let host = meta::validate_dns1123_subdomain("Bad Host").unwrap_err();
        want.push(format!("spec.hostAliases[0].hostnames[0]: Invalid value: \"Bad Host\": {host}"));
        want.extend([
            "spec.dnsConfig.nameservers: Invalid value: []string{\"1.1.1.1\", \"2.2.2.2\", \"3.3.3.3\", \"nope\"}: must not have more than 3 nameservers".to_string(),
            format!("spec.dnsConfig.nameservers[3]: Invalid value: \"nope\": {NOT_IP}"),
            "spec.dnsConfig.searches[1]: Invalid value: \"Bad_Domain\": a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '_', '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '_?[a-z0-9]([-_a-z0-9]*[a-z0-9])?(\\._?[a-z0-9]([-_a-z0-9]*[a-z0-9])?)*')".into(),
            "spec.dnsConfig.options[0]: Required value: must not be empty".into(),
            format!("spec.hostAliases[0].ip: Invalid value: \"10.0.0.300\": {NOT_IP}"),
        ]);
        want.push(format!("spec.serviceAccountName: Invalid value: \"Bad SA\": {subdomain}"));
        want.extend(
            meta::qualified_name_errors("bad gate!")
                .iter()
                .map(|why| format!("spec.readinessGates[0].conditionType: Invalid value: \"bad gate!\": {why}")),
        );
        for w in &want {
            assert!(got.contains(w), "{w}\nin {got:#?}");
        }
        assert_eq!(got.len(), want.len(), "{got:#?}");
    }

    #[test]
    fn what_kube_refuses_whole_is_not_looked_into() {
        // A volume's sources after the first in kube's order are refused, not checked, at kube's
        // paths (two of them spelled as kube spells them); an init container's probe and hook, when
        // it is no sidecar, likewise.
        let spec = json!({"containers": [{"name": "c", "image": "x"}],
            "initContainers": [{"name": "i", "image": "x", "livenessProbe": {"periodSeconds": -1},
                "lifecycle": {"postStart": {}}}],
            "volumes": [
                {"name": "a", "hostPath": {"path": ""}, "emptyDir": {}},
                {"name": "b", "emptyDir": {}, "cephfs": {"monitors": []}, "downwardAPI": {"items": [{"path": "/abs"}]}}]});
        let mut got = messages("v1", "Pod", json!({"metadata": {"name": "p"}, "spec": spec}));
        got.sort();
        assert_eq!(got, [
            "spec.initContainers[0].lifecycle: Forbidden: may not be set for init containers without restartPolicy=Always",
            "spec.initContainers[0].livenessProbe: Forbidden: may not be set for init containers without restartPolicy=Always",
            "spec.volumes[0].hostPath: Forbidden: may not specify more than 1 volume type",
            "spec.volumes[1].cephFS: Forbidden: may not specify more than 1 volume type",
            "spec.volumes[1].downwarAPI: Forbidden: may not specify more than 1 volume type",
        ]);
    }

    #[test]
    fn ephemeral_containers_as_kube_checks_them() {
        let old = json!({"metadata": {"name": "p"}, "spec": {"containers": [{"name": "app", "image": "x"}],
            "initContainers": [{"name": "init", "image": "x"}], "volumes": [{"name": "v", "emptyDir": {}}]}});
        let mut new = old.clone();
        new["spec"]["ephemeralContainers"] = json!([
            {"name": "debug", "image": "busybox", "targetContainerName": "app", "stdin": true, "tty": true,
                "securityContext": {"capabilities": {"add": ["SYS_PTRACE"]}}, "resources": {},
                "volumeMounts": [{"name": "v", "mountPath": "/v"}]},
            {"name": "app", "image": " busybox", "targetContainerName": "debug", "terminationMessagePolicy": "Never",
                "ports": [], "resources": {"limits": {"cpu": "1"}}, "resizePolicy": [{"resourceName": "cpu", "restartPolicy": "NotRequired"}],
                "restartPolicy": "Always", "livenessProbe": {"exec": {"command": ["true"]}}, "lifecycle": {},
                "volumeMounts": [{"name": "v", "mountPath": "/v", "subPath": "a"}, {"name": "w", "mountPath": "/w", "subPathExpr": "$(X)"}]},
            {"name": "", "image": "busybox"}]);
        let lines = testing::lines(errors("v1", "Pod", &new, Some(&old)));
        assert_eq!(lines, [
            "spec.ephemeralContainers[1].volumeMounts[1].name: Not found: \"w\"",
            "spec.ephemeralContainers[1].terminationMessagePolicy: Unsupported value: \"Never\": supported values: \"File\", \"FallbackToLogsOnError\"",
            "spec.ephemeralContainers[1].image: Invalid value: \" busybox\": must not have leading or trailing whitespace",
            "spec.ephemeralContainers[1].name: Duplicate value: \"app\"",
            "spec.ephemeralContainers[1].targetContainerName: Not found: \"debug\"",
            "spec.ephemeralContainers[1].ports: Forbidden: cannot be set for an Ephemeral Container",
            "spec.ephemeralContainers[1].resources: Forbidden: cannot be set for an Ephemeral Container",
            "spec.ephemeralContainers[1].resizePolicy: Forbidden: cannot be set for an Ephemeral Container",
            "spec.ephemeralContainers[1].restartPolicy: Forbidden: cannot be set for an Ephemeral Container",
            "spec.ephemeralContainers[1].livenessProbe: Forbidden: cannot be set for an Ephemeral Container",
            "spec.ephemeralContainers[1].lifecycle: Forbidden: cannot be set for an Ephemeral Container",
            "spec.ephemeralContainers[1].volumeMounts[0].subPath: Forbidden: cannot be set for an Ephemeral Container",
            "spec.ephemeralContainers[1].volumeMounts[1].subPathExpr: Forbidden: cannot be set for an Ephemeral Container",
            "spec.ephemeralContainers[2].name: Required value",
        ]);
        // Probes and hooks are refused whole, their contents not looked at.
        let mut probed = old.clone();
        probed["spec"]["ephemeralContainers"] = json!([{"name": "debug", "image": "busybox",
            "readinessProbe": {"periodSeconds": -1}, "lifecycle": {"preStop": {}}}]);
        assert_eq!(
            testing::lines(errors("v1", "Pod", &probed, Some(&old))),
            [
                "spec.ephemeralContainers[0].readinessProbe: Forbidden: cannot be set for an Ephemeral Container",
                "spec.ephemeralContainers[0].lifecycle: Forbidden: cannot be set for an Ephemeral Container",
            ]
        );
        // Only through the subresource: never on create, never in a template (but a StatefulSet's,
        // whose template kube does not check as one).
        let mut created = old.clone();
        created["spec"]["ephemeralContainers"] = json!([{"name": "debug", "image": "busybox"}]);
        assert_eq!(
            messages("v1", "Pod", created.clone()),
            ["spec.ephemeralContainers: Forbidden: cannot be set on create"]
        );
        assert_eq!(testing::lines(errors("v1", "Pod", &created, Some(&old))), Vec::<String>::new());
        let template = json!({"template": {"metadata": {"labels": {"a": "b"}}, "spec": created["spec"].clone()}});
        assert_eq!(
            messages("v1", "PodTemplate", template),
            ["template.spec.ephemeralContainers: Forbidden: ephemeral containers not allowed in pod template"]
        );
        let mut set = json!({"spec": {"selector": {"matchLabels": {"a": "b"}}, "serviceName": "s",
            "template": {"metadata": {"labels": {"a": "b"}}, "spec": created["spec"].clone()}}});
        set["spec"]["template"]["spec"]["restartPolicy"] = json!("Always");
        assert_eq!(messages("apps/v1", "StatefulSet", set), Vec::<String>::new());
    }

    #[test]
    fn well_formed_containers_and_templates_pass() {
        let container = json!({"name": "c", "image": "nginx", "imagePullPolicy": "IfNotPresent",
            "terminationMessagePolicy": "FallbackToLogsOnError",
            "livenessProbe": {"httpGet": {"path": "/healthz", "port": "http", "scheme": "HTTPS",
                "httpHeaders": [{"name": "X-Probe", "value": "1"}]}, "successThreshold": 1, "terminationGracePeriodSeconds": 10},
            "readinessProbe": {"grpc": {"port": 9090}},
            "lifecycle": {"preStop": {"sleep": {"seconds": 0}}, "postStart": {"exec": {"command": ["true"]}}},
            "ports": [{"name": "http", "containerPort": 8080, "protocol": "TCP"}],
            "envFrom": [{"prefix": "APP_", "configMapRef": {"name": "settings-"}}, {"secretRef": {"name": "creds"}}],
            "resizePolicy": [{"resourceName": "cpu", "restartPolicy": "NotRequired"},
                {"resourceName": "memory", "restartPolicy": "RestartContainer"}]});
        let spec = json!({"containers": [container], "terminationGracePeriodSeconds": 30, "restartPolicy": "Always",
            "initContainers": [{"name": "sidecar", "image": "x", "restartPolicy": "Always",
                "startupProbe": {"tcpSocket": {"port": 80}}}],
            "hostname": "web-0", "subdomain": "web", "serviceAccountName": "builder", "activeDeadlineSeconds": 600,
            "priorityClassName": "high", "runtimeClassName": "gvisor", "preemptionPolicy": "Never",
            "readinessGates": [{"conditionType": "example.com/ready"}],
            "tolerations": [{"operator": "Exists"}, {"key": "node.kubernetes.io/not-ready", "operator": "Exists",
                "effect": "NoExecute", "tolerationSeconds": 300}, {"key": "team", "value": "a", "effect": "NoSchedule"}],
            "dnsPolicy": "None", "dnsConfig": {"nameservers": ["10.96.0.10", "fd00::a"],
                "searches": ["svc.cluster.local", "_srv.example.com", "."], "options": [{"name": "ndots", "value": "2"}]},
            "hostAliases": [{"ip": "127.0.0.1", "hostnames": ["foo.local"]}]});
        assert_eq!(messages("v1", "Pod", json!({"metadata": {"name": "p"}, "spec": spec})), Vec::<String>::new());
        // A template's host port may be left for defaulting with the host's network, and its image is not
        // trimmed-checked (kube checks those on pods alone).
        let template = json!({"metadata": {"labels": {"app": "d"}}, "spec": {"hostNetwork": true,
            "containers": [{"name": "c", "image": "x ", "ports": [{"containerPort": 80, "protocol": "TCP"}]}]}});
        let deploy = json!({"spec": {"selector": {"matchLabels": {"app": "d"}}, "template": template}});
        assert_eq!(messages("apps/v1", "Deployment", deploy), Vec::<String>::new());
    }
}
