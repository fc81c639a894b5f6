//! A pod's security settings as kube 1.33 checks them (`validatePodSpecSecurityContext`,
//! `ValidateSecurityContext`, `validateHostUsers`, `validateWindowsHostProcessPod`, `validateOS`,
//! `validateLinux`, `validateWindows`): sysctls, file-system group and supplemental-group policies,
//! SELinux relabelling, `/proc` mounts, user namespaces against host namespaces, Windows options and
//! host-process pods, and the fields an operating system named in `spec.os` forbids.

use std::sync::LazyLock;

use regex::Regex;

use super::*;

/// apimachinery-free: kube's `SysctlContainSlashFmt`, shown in its words as Go prints the regexp.
const SYSCTL_FMT: &str = r"^([a-z0-9]([-_a-z0-9]*[a-z0-9])?[\./])*[a-z0-9]([-_a-z0-9]*[a-z0-9])?$";
static SYSCTL: LazyLock<Regex> = LazyLock::new(|| Regex::new(SYSCTL_FMT).unwrap());
const SYSCTL_MAX: usize = 253;
const IPC_SYSCTLS: &[&str] = &[
    "kernel.sem",
    "kernel.shmall",
    "kernel.shmmax",
    "kernel.shmmni",
    "kernel.shm_rmid_forced",
    "kernel.shm",
    "kernel.msgmax",
    "kernel.msgmnb",
    "kernel.msgmni",
    "kernel.msg",
];

/// A Windows domain as NetBIOS names it (1 to 15 characters, none of `\/:*?"<>|`, not starting with a
/// dot) or as DNS does; and what a Windows user name may not hold.
static NETBIOS: LazyLock<Regex> = LazyLock::new(|| Regex::new(r#"^[^\\/:*?"<>|.][^\\/:*?"<>|]{0,14}$"#).unwrap());
static WINDOWS_DNS: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"^[a-zA-Z0-9](?:[a-zA-Z0-9-]{0,61}[a-zA-Z0-9])?(?:\.[a-zA-Z0-9](?:[a-zA-Z0-9-]{0,61}[a-zA-Z0-9])?)*$")
        .unwrap()
});
const USER_BAD_CHARS: &str = "\"/\\:;|=,+*?<>@[]";
const DOMAIN_MAX: usize = 256;
const USER_MAX: usize = 104;
const GMSA_MAX_KIB: usize = 64;

const WINDOWS_FORBIDS: &str = "cannot be set for a windows pod";
const LINUX_FORBIDS: &str = "windows options cannot be set for a linux pod";
const WITHOUT_HOST_USERS: &str = "when `pod.Spec.HostUsers` is false";

/// Whether a field is set, as Go sees a pointer or slice decoded from JSON: present and not null (an
/// empty list is a set slice).
fn set(v: Option<&Value>) -> bool {
    v.is_some_and(|f| !f.is_null())
}

fn flag(v: Option<&Value>) -> bool {
    v == Some(&Value::Bool(true))
}

/// A set string field that is not one of `supported`: kube's `NotSupported`, the empty string
/// included (these are pointers: set to "" is a value, not a missing one).
fn supported_value(v: &Value, field: &str, at: String, supported: &[&str], causes: &mut Vec<Cause>) {
    if let Some(value) = v.get(field).filter(|f| !f.is_null()) {
        if !value.as_str().is_some_and(|s| supported.contains(&s)) {
            not_supported(causes, at, value, supported);
        }
    }
}

/// The pod's containers in kube's visiting order (`VisitContainersWithPath`): init containers, then
/// containers, then ephemeral containers, each with its path.
fn containers<'a>(spec: &'a Map<String, Value>, path: &Path) -> Vec<(String, &'a Value)> {
    let mut all = Vec::new();
    for list in ["initContainers", "containers", "ephemeralContainers"] {
        let at = path.child(list);
        for (i, c) in spec.get(list).and_then(Value::as_array).into_iter().flatten().enumerate() {
            all.push((format!("{at}[{i}]"), c));
        }
    }
    all
}

/// Every security check of a pod spec at `path`.
pub(super) fn pod_security(spec: &Map<String, Value>, path: &Path, causes: &mut Vec<Cause>) {
    let pod = Value::Object(Map::new());
    let context = spec.get("securityContext").filter(|c| c.is_object()).unwrap_or(&pod);
    let context_at = path.child("securityContext");
    // `hostUsers` defaults to true: only an explicit false asks for a user namespace.
    let host_users = spec.get("hostUsers") != Some(&Value::Bool(false));
    let all = containers(spec, path);
    for (at, c) in &all {
        let sc = &c["securityContext"];
        let proc_at = format!("{at}.securityContext.procMount");
        supported_value(sc, "procMount", proc_at.clone(), &["Default", "Unmasked"], causes);
        if host_users && sc["procMount"] == "Unmasked" {
            invalid(causes, proc_at, "\"Unmasked\"".into(), "`hostUsers` must be false to use `Unmasked`");
        }
    }
    if flag(spec.get("shareProcessNamespace")) && flag(spec.get("hostPID")) {
        let why = "ShareProcessNamespace and HostPID cannot both be enabled";
        invalid(causes, format!("{context_at}.shareProcessNamespace"), "true".into(), why);
    }
    sysctls(spec, context, &context_at, causes);
    supported_value(
        context,
        "fsGroupChangePolicy",
        format!("{context_at}.fsGroupChangePolicy"),
        &["Always", "OnRootMismatch"],
        causes,
    );
    supported_value(
        context,
        "supplementalGroupsPolicy",
        format!("{context_at}.supplementalGroupsPolicy"),
        &["Merge", "Strict"],
        causes,
    );
    // 1.33 serves the policy (gate `SELinuxChangePolicy`) but not the mount option that `MountOption`
    // needs (gate `SELinuxMount`, off): kube then takes `Recursive` alone.
    supported_value(
        context,
        "seLinuxChangePolicy",
        format!("{context_at}.seLinuxChangePolicy"),
        &["Recursive"],
        causes,
    );
    host_process(spec, context, path, &all, causes);
    if !host_users {
        for (field, shown_as) in [("hostNetwork", "hostNetwork"), ("hostPID", "HostPID"), ("hostIPC", "HostIPC")] {
            if flag(spec.get(field)) {
                // kube names two of them by their Go fields.
                forbidden(causes, &path.child(shown_as), WITHOUT_HOST_USERS);
            }
        }
    }
    operating_system(spec, context, path, &all, causes);
}

/// A pod's sysctls (kube's `validateSysctls` and `ValidateHostSysctl`): named, by sysctl's grammar,
/// once each, and none of a namespace the pod shares with the host.
fn sysctls(spec: &Map<String, Value>, context: &Value, context_at: &str, causes: &mut Vec<Cause>) {
    let (host_network, host_ipc) = (flag(spec.get("hostNetwork")), flag(spec.get("hostIPC")));
    let mut names = HashSet::new();
    for (i, sysctl) in list(context, "sysctls").iter().enumerate() {
        let at = format!("{context_at}.sysctls[{i}].name");
        let name = text(sysctl, "name");
        if name.is_empty() {
            required(causes, at.clone());
        } else if name.len() > SYSCTL_MAX || !SYSCTL.is_match(name) {
            let why = format!("must have at most {SYSCTL_MAX} characters and match regex {SYSCTL_FMT}");
            invalid(causes, at.clone(), format!("{name:?}"), &why);
        } else if names.contains(name) {
            duplicate(causes, &at, name);
        }
        match sysctl_namespace(name) {
            Some(SysctlNamespace::Net) if host_network => {
                invalid(causes, at, format!("{name:?}"), "may not be specified when 'hostNetwork' is true")
            }
            Some(SysctlNamespace::Ipc) if host_ipc => {
                invalid(causes, at, format!("{name:?}"), "may not be specified when 'hostIPC' is true")
            }
            _ => {}
        }
        names.insert(name);
    }
}

enum SysctlNamespace {
    Ipc,
    Net,
}

/// The kernel namespace a sysctl belongs to (component-helpers' `GetNamespace`), its name read with
/// dots as separators whichever of `.` and `/` it uses first, up to a `*`: IPC's by their exact
/// names (`kernel.shm` and `kernel.msg` standing for their `*` forms), the network's and message
/// queues' by prefix.
fn sysctl_namespace(name: &str) -> Option<SysctlNamespace> {
    let slashed = name.find(['.', '/']).is_some_and(|i| name.as_bytes()[i] == b'/');
    let normal: String = if slashed {
        name.chars()
            .map(|c| match c {
                '.' => '/',
                '/' => '.',
                c => c,
            })
            .collect()
    } else {
        name.to_string()
    };
    let prefix = normal.split('*').next().unwrap_or_default();
    if IPC_SYSCTLS.contains(&prefix) || prefix.starts_with("fs.mqueue.") {
        Some(SysctlNamespace::Ipc)
    } else if prefix.starts_with("net.") {
        Some(SysctlNamespace::Net)
    } else {
        None
    }
}

/// Windows host-process containers (kube's `validateWindowsHostProcessPod`): the pod's and a
/// container's choice agree where both are given, and a pod with one has them alone and the host's
/// network. (kgate allows privileged pods, so the cluster policy kube also consults allows them.)
fn host_process(
    spec: &Map<String, Value>,
    context: &Value,
    path: &Path,
    all: &[(String, &Value)],
    causes: &mut Vec<Cause>,
) {
    let pod_choice = context["windowsOptions"]["hostProcess"].as_bool();
    let mut host_processes = 0;
    for (at, c) in all {
        let choice = c["securityContext"]["windowsOptions"]["hostProcess"].as_bool();
        if let (Some(pod), Some(own)) = (pod_choice, choice) {
            if pod != own {
                let why = format!("pod hostProcess value must be identical if both are specified, was {pod}");
                invalid(causes, format!("{at}.securityContext.windowsOptions.hostProcess"), own.to_string(), &why);
            }
        }
        if choice.or(pod_choice) == Some(true) {
            host_processes += 1;
        }
    }
    if host_processes == 0 {
        return;
    }
    if host_processes != all.len() {
        let why = "If pod contains any hostProcess containers then all containers must be HostProcess containers";
        invalid(causes, path.render(), "\"\"".into(), why);
    }
    if !flag(spec.get("hostNetwork")) {
        let why = "hostNetwork must be true if pod contains any hostProcess containers";
        invalid(causes, path.child("hostNetwork"), "false".into(), why);
    }
}

/// `spec.os` (kube's `validateOS`), then what that operating system forbids (`validateLinux`,
/// `validateWindows`), checked only when the name is valid.
fn operating_system(
    spec: &Map<String, Value>,
    context: &Value,
    path: &Path,
    all: &[(String, &Value)],
    causes: &mut Vec<Cause>,
) {
    let Some(os) = spec.get("os").filter(|o| !o.is_null()) else { return };
    let context_at = path.child("securityContext");
    match os.get("name").filter(|n| !n.is_null() && *n != "") {
        None => required_why(causes, &format!("{}.name", path.child("os")), "cannot be empty"),
        Some(name) if name == "linux" => linux_forbids(context, &context_at, all, causes),
        Some(name) if name == "windows" => windows_forbids(spec, context, path, all, causes),
        Some(name) => not_supported(causes, path.child("os"), name, &["linux", "windows"]),
    }
}

/// kube's `validateLinux`: no Windows options, the pod's or a container's.
fn linux_forbids(context: &Value, context_at: &str, all: &[(String, &Value)], causes: &mut Vec<Cause>) {
    if set(context.get("windowsOptions")) {
        forbidden(causes, &format!("{context_at}.windowsOptions"), LINUX_FORBIDS);
    }
    for (at, c) in all {
        if set(c["securityContext"].get("windowsOptions")) {
            forbidden(causes, &format!("{at}.securityContext.windowsOptions"), LINUX_FORBIDS);
        }
    }
}

/// What a container of a Windows pod may not set in its security context, in kube's order.
const WINDOWS_CONTAINER_FORBIDS: &[&str] = &[
    "appArmorProfile",
    "seLinuxOptions",
    "seccompProfile",
    "capabilities",
    "readOnlyRootFilesystem",
    "privileged",
    "allowPrivilegeEscalation",
    "procMount",
    "runAsUser",
    "runAsGroup",
];

/// kube's `validateWindows`: the pod's Linux-only settings, in kube's order (the namespace fields
/// live on the spec in v1 and are reported there), then each container's.
fn windows_forbids(
    spec: &Map<String, Value>,
    context: &Value,
    path: &Path,
    all: &[(String, &Value)],
    causes: &mut Vec<Cause>,
) {
    let pod_level: [(bool, bool, &str); 15] = [
        (false, set(context.get("appArmorProfile")), "appArmorProfile"),
        (false, set(context.get("seLinuxOptions")), "seLinuxOptions"),
        (true, set(spec.get("hostUsers")), "hostUsers"),
        (true, flag(spec.get("hostPID")), "hostPID"),
        (true, flag(spec.get("hostIPC")), "hostIPC"),
        (false, set(context.get("seccompProfile")), "seccompProfile"),
        (false, set(context.get("fsGroup")), "fsGroup"),
        (false, set(context.get("fsGroupChangePolicy")), "fsGroupChangePolicy"),
        (false, !list(context, "sysctls").is_empty(), "sysctls"),
        (true, set(spec.get("shareProcessNamespace")), "shareProcessNamespace"),
        (false, set(context.get("runAsUser")), "runAsUser"),
        (false, set(context.get("runAsGroup")), "runAsGroup"),
        (false, set(context.get("supplementalGroups")), "supplementalGroups"),
        (false, set(context.get("supplementalGroupsPolicy")), "supplementalGroupsPolicy"),
        (false, set(context.get("seLinuxChangePolicy")), "seLinuxChangePolicy"),
    ];
    for (on_spec, _, field) in pod_level.iter().filter(|(_, is_set, _)| *is_set) {
        let at = if *on_spec { path.child(field) } else { format!("{}.{field}", path.child("securityContext")) };
        forbidden(causes, &at, WINDOWS_FORBIDS);
    }
    for (at, c) in all {
        let sc = &c["securityContext"];
        for field in WINDOWS_CONTAINER_FORBIDS.iter().filter(|f| set(sc.get(**f))) {
            forbidden(causes, &format!("{at}.securityContext.{field}"), WINDOWS_FORBIDS);
        }
    }
}

/// A pod's or container's Windows options (kube's `validateWindowsSecurityContextOptions`): a GMSA
/// credential spec's name and size, and a user name `[DOMAIN\]USER` by Windows' rules.
pub(super) fn windows_options(map: &Map<String, Value>, path: &Path, causes: &mut Vec<Cause>) {
    if let Some(name) = map.get("gmsaCredentialSpecName").and_then(Value::as_str) {
        for why in meta::dns1123_subdomain_errors(name) {
            invalid(causes, path.child("gmsaCredentialSpecName"), format!("{name:?}"), &why);
        }
    }
    if let Some(credential) = map.get("gmsaCredentialSpec").and_then(Value::as_str) {
        let at = path.child("gmsaCredentialSpec");
        if credential.is_empty() {
            invalid(causes, at, "\"\"".into(), "gmsaCredentialSpec cannot be an empty string");
        } else if credential.len() > GMSA_MAX_KIB * 1024 {
            let why = format!("gmsaCredentialSpec size must be under {GMSA_MAX_KIB} KiB");
            invalid(causes, at, format!("{credential:?}"), &why);
        }
    }
    if let Some(user_name) = map.get("runAsUserName").and_then(Value::as_str) {
        let at = path.child("runAsUserName");
        for why in user_name_problems(user_name) {
            invalid(causes, at.clone(), meta::go_quote(user_name), &why);
        }
    }
}

/// What is wrong with a Windows user name, in kube's words and order.
fn user_name_problems(user_name: &str) -> Vec<String> {
    if user_name.is_empty() {
        return vec!["runAsUserName cannot be an empty string".into()];
    }
    if user_name.chars().any(|c| c.is_ascii_control()) {
        return vec!["runAsUserName cannot contain control characters".into()];
    }
    let parts: Vec<&str> = user_name.split('\\').collect();
    let (domain, user) = match parts.as_slice() {
        [user] => (None, *user),
        [domain, user] => (Some(*domain), *user),
        _ => return vec!["runAsUserName cannot contain more than one backslash".into()],
    };
    let mut problems = Vec::new();
    if domain.is_some_and(|d| d.len() >= DOMAIN_MAX) {
        problems.push(format!("runAsUserName's Domain length must be under {DOMAIN_MAX} characters"));
    }
    if domain.is_some_and(|d| !NETBIOS.is_match(d) && !WINDOWS_DNS.is_match(d)) {
        problems.push("runAsUserName's Domain doesn't match the NetBios nor the DNS format".into());
    }
    if user.is_empty() {
        problems.push("runAsUserName's User cannot be empty".into());
    } else if user.len() > USER_MAX {
        problems.push(format!("runAsUserName's User length must not be longer than {USER_MAX} characters"));
    }
    if !user.is_empty() && user.chars().all(|c| c == '.' || c == ' ') {
        problems.push("runAsUserName's User cannot contain only periods or spaces".into());
    }
    if user.chars().any(|c| USER_BAD_CHARS.contains(c)) {
        problems.push(format!("runAsUserName's User cannot contain the following characters: {USER_BAD_CHARS}"));
    }
    problems
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn pod(spec: Value) -> Vec<String> {
        let mut spec = spec;
        spec.as_object_mut().unwrap().entry("containers").or_insert(json!([{"name": "c", "image": "x"}]));
        let mut found = testing::lines(errors("v1", "Pod", &json!({"metadata": {"name": "p"}, "spec": spec}), None));
        found.sort();
        found
    }

    fn sorted(lines: &[&str]) -> Vec<String> {
        let mut lines: Vec<String> = lines.iter().map(|l| l.to_string()).collect();
        lines.sort();
        lines
    }

    #[test]
    fn sysctls_policies_proc_mounts_and_user_namespaces_as_kube_checks_them() {
        let spec = json!({"hostNetwork": true, "hostIPC": true, "hostPID": true, "shareProcessNamespace": true,
            "securityContext": {
                "sysctls": [{"name": "net.core.somaxconn", "value": "1"}, {"name": "kernel.shm_rmid_forced", "value": "1"},
                    {"name": "net/ipv4/conf/eno2.100/rp_filter", "value": "1"}, {"name": "Bad_Name", "value": "1"},
                    {"name": "kernel.shm_next_id", "value": "1"}, {"name": "fs.mqueue.msg_max", "value": "1"},
                    {"name": "kernel.msg*", "value": "1"},
                    {"name": "", "value": "1"}, {"name": "kernel.shm_rmid_forced", "value": "0"}, {"name": "vm.swappiness", "value": "1"}],
                "fsGroupChangePolicy": "Sometimes", "supplementalGroupsPolicy": "", "seLinuxChangePolicy": "MountOption"},
            "containers": [{"name": "c", "image": "x", "securityContext": {"procMount": "Unmasked"}}],
            "initContainers": [{"name": "i", "image": "x", "securityContext": {"procMount": "Hidden"}}]});
        let regex = r"^([a-z0-9]([-_a-z0-9]*[a-z0-9])?[\./])*[a-z0-9]([-_a-z0-9]*[a-z0-9])?$";
        assert_eq!(pod(spec), sorted(&[
            "spec.initContainers[0].securityContext.procMount: Unsupported value: \"Hidden\": supported values: \"Default\", \"Unmasked\"",
            "spec.containers[0].securityContext.procMount: Invalid value: \"Unmasked\": `hostUsers` must be false to use `Unmasked`",
            "spec.securityContext.shareProcessNamespace: Invalid value: true: ShareProcessNamespace and HostPID cannot both be enabled",
            "spec.securityContext.sysctls[0].name: Invalid value: \"net.core.somaxconn\": may not be specified when 'hostNetwork' is true",
            "spec.securityContext.sysctls[1].name: Invalid value: \"kernel.shm_rmid_forced\": may not be specified when 'hostIPC' is true",
            "spec.securityContext.sysctls[2].name: Invalid value: \"net/ipv4/conf/eno2.100/rp_filter\": may not be specified when 'hostNetwork' is true",
            &format!("spec.securityContext.sysctls[3].name: Invalid value: \"Bad_Name\": must have at most 253 characters and match regex {regex}"),
            "spec.securityContext.sysctls[7].name: Required value",
            "spec.securityContext.sysctls[8].name: Duplicate value: \"kernel.shm_rmid_forced\"",
            "spec.securityContext.sysctls[8].name: Invalid value: \"kernel.shm_rmid_forced\": may not be specified when 'hostIPC' is true",
            "spec.securityContext.sysctls[5].name: Invalid value: \"fs.mqueue.msg_max\": may not be specified when 'hostIPC' is true",
            &format!("spec.securityContext.sysctls[6].name: Invalid value: \"kernel.msg*\": must have at most 253 characters and match regex {regex}"),
            "spec.securityContext.sysctls[6].name: Invalid value: \"kernel.msg*\": may not be specified when 'hostIPC' is true",
            "spec.securityContext.fsGroupChangePolicy: Unsupported value: \"Sometimes\": supported values: \"Always\", \"OnRootMismatch\"",
            "spec.securityContext.supplementalGroupsPolicy: Unsupported value: \"\": supported values: \"Merge\", \"Strict\"",
            "spec.securityContext.seLinuxChangePolicy: Unsupported value: \"MountOption\": supported values: \"Recursive\"",
        ]));
        // A user namespace takes none of the host's; `Unmasked` needs one.
        let spec = json!({"hostUsers": false, "hostNetwork": true, "hostPID": true, "hostIPC": true,
            "containers": [{"name": "c", "image": "x", "securityContext": {"procMount": "Unmasked"}}]});
        assert_eq!(
            pod(spec),
            sorted(&[
                "spec.hostNetwork: Forbidden: when `pod.Spec.HostUsers` is false",
                "spec.HostPID: Forbidden: when `pod.Spec.HostUsers` is false",
                "spec.HostIPC: Forbidden: when `pod.Spec.HostUsers` is false",
            ])
        );
    }

    #[test]
    fn windows_options_and_host_process_pods_as_kube_checks_them() {
        let spec = json!({"securityContext": {"windowsOptions": {"hostProcess": true, "gmsaCredentialSpecName": "Not_A_Name",
                "gmsaCredentialSpec": "", "runAsUserName": "a\\b\\c"}},
            "containers": [{"name": "c", "image": "x", "securityContext": {"windowsOptions": {"hostProcess": false,
                "runAsUserName": "bad:domain\\..."}}}, {"name": "d", "image": "x"}]});
        let dns = meta::validate_dns1123_subdomain("Not_A_Name").unwrap_err();
        assert_eq!(pod(spec), sorted(&[
            &format!("spec.securityContext.windowsOptions.gmsaCredentialSpecName: Invalid value: \"Not_A_Name\": {dns}"),
            "spec.securityContext.windowsOptions.gmsaCredentialSpec: Invalid value: \"\": gmsaCredentialSpec cannot be an empty string",
            "spec.securityContext.windowsOptions.runAsUserName: Invalid value: \"a\\\\b\\\\c\": runAsUserName cannot contain more than one backslash",
            "spec.containers[0].securityContext.windowsOptions.runAsUserName: Invalid value: \"bad:domain\\\\...\": runAsUserName's Domain doesn't match the NetBios nor the DNS format",
            "spec.containers[0].securityContext.windowsOptions.runAsUserName: Invalid value: \"bad:domain\\\\...\": runAsUserName's User cannot contain only periods or spaces",
            "spec.containers[0].securityContext.windowsOptions.hostProcess: Invalid value: false: pod hostProcess value must be identical if both are specified, was true",
            "spec: Invalid value: \"\": If pod contains any hostProcess containers then all containers must be HostProcess containers",
            "spec.hostNetwork: Invalid value: false: hostNetwork must be true if pod contains any hostProcess containers",
        ]));
        let long_user = "u".repeat(105);
        let cases = [
            ("", "runAsUserName cannot be an empty string"),
            ("a\u{7}b", "runAsUserName cannot contain control characters"),
            ("domain\\", "runAsUserName's User cannot be empty"),
            (long_user.as_str(), "runAsUserName's User length must not be longer than 104 characters"),
            ("us[er]", "runAsUserName's User cannot contain the following characters: \"/\\:;|=,+*?<>@[]"),
        ];
        for (name, why) in cases {
            assert_eq!(user_name_problems(name), vec![why.to_string()], "{name:?}");
        }
        for fine in ["user", "NT AUTHORITY\\NETWORK SERVICE", "corp.example.com\\svc-1", "ContainerAdministrator"] {
            assert_eq!(user_name_problems(fine), Vec::<String>::new(), "{fine:?}");
        }
        // Host-process containers all the way, on the host's network: accepted.
        let spec = json!({"hostNetwork": true, "securityContext": {"windowsOptions": {"hostProcess": true}},
            "containers": [{"name": "c", "image": "x", "ports": [{"containerPort": 80, "hostPort": 80, "protocol": "TCP"}]}]});
        assert_eq!(pod(spec), Vec::<String>::new());
    }

    #[test]
    fn what_an_operating_system_forbids_as_kube_checks_it() {
        assert_eq!(pod(json!({"os": {}})), sorted(&["spec.os.name: Required value: cannot be empty"]));
        assert_eq!(
            pod(json!({"os": {"name": "darwin"}, "securityContext": {"windowsOptions": {}}})),
            sorted(&["spec.os: Unsupported value: \"darwin\": supported values: \"linux\", \"windows\""])
        );
        let linux = json!({"os": {"name": "linux"}, "securityContext": {"windowsOptions": {"runAsUserName": "u"}},
            "containers": [{"name": "c", "image": "x", "securityContext": {"windowsOptions": {}}}]});
        assert_eq!(pod(linux), sorted(&[
            "spec.securityContext.windowsOptions: Forbidden: windows options cannot be set for a linux pod",
            "spec.containers[0].securityContext.windowsOptions: Forbidden: windows options cannot be set for a linux pod",
        ]));
        let windows = json!({"os": {"name": "windows"}, "hostUsers": true, "hostPID": true, "hostIPC": false,
            "shareProcessNamespace": false,
            "securityContext": {"runAsUser": 1, "runAsGroup": 1, "fsGroup": 1, "supplementalGroups": [], "sysctls": [{"name": "a.b", "value": "1"}],
                "seccompProfile": {"type": "RuntimeDefault"}, "seLinuxOptions": {"level": "s0"}, "appArmorProfile": {"type": "RuntimeDefault"},
                "fsGroupChangePolicy": "Always", "supplementalGroupsPolicy": "Merge", "seLinuxChangePolicy": "Recursive",
                "windowsOptions": {"runAsUserName": "ContainerUser"}},
            "containers": [{"name": "c", "image": "x", "securityContext": {"privileged": false, "capabilities": {},
                "readOnlyRootFilesystem": true, "allowPrivilegeEscalation": true, "procMount": "Default", "runAsUser": 1,
                "runAsGroup": 1, "seccompProfile": {"type": "RuntimeDefault"}, "seLinuxOptions": {}, "appArmorProfile": {"type": "Unconfined"},
                "windowsOptions": {"runAsUserName": "ContainerAdministrator"}}}]});
        let mut expected = vec![];
        for f in ["hostUsers", "hostPID", "shareProcessNamespace"] {
            expected.push(format!("spec.{f}: Forbidden: cannot be set for a windows pod"));
        }
        for f in [
            "appArmorProfile",
            "seLinuxOptions",
            "seccompProfile",
            "fsGroup",
            "fsGroupChangePolicy",
            "sysctls",
            "runAsUser",
            "runAsGroup",
            "supplementalGroups",
            "supplementalGroupsPolicy",
            "seLinuxChangePolicy",
        ] {
            expected.push(format!("spec.securityContext.{f}: Forbidden: cannot be set for a windows pod"));
        }
        for f in [
            "appArmorProfile",
            "seLinuxOptions",
            "seccompProfile",
            "capabilities",
            "readOnlyRootFilesystem",
            "privileged",
            "allowPrivilegeEscalation",
            "procMount",
            "runAsUser",
            "runAsGroup",
        ] {
            expected
                .push(format!("spec.containers[0].securityContext.{f}: Forbidden: cannot be set for a windows pod"));
        }
        expected.sort();
        assert_eq!(pod(windows), expected);
        // The same settings in a template, checked as a pod's.
        let template = json!({"spec": {"selector": {"matchLabels": {"a": "b"}}, "template": {"metadata": {"labels": {"a": "b"}},
            "spec": {"os": {"name": "linux"}, "containers": [{"name": "c", "image": "x",
                "securityContext": {"windowsOptions": {}}}]}}}});
        assert_eq!(
            testing::lines(errors("apps/v1", "Deployment", &template, None)),
            vec!["spec.template.spec.containers[0].securityContext.windowsOptions: Forbidden: windows options cannot be set for a linux pod"]
        );
    }

    #[test]
    fn well_formed_security_settings_pass() {
        let linux = json!({"os": {"name": "linux"}, "hostUsers": false, "shareProcessNamespace": true,
            "securityContext": {"runAsUser": 1000, "runAsGroup": 1000, "fsGroup": 2000, "supplementalGroups": [3000],
                "fsGroupChangePolicy": "OnRootMismatch", "supplementalGroupsPolicy": "Strict", "seLinuxChangePolicy": "Recursive",
                "sysctls": [{"name": "net.ipv4.ip_local_port_range", "value": "1024 65535"}, {"name": "kernel.shm_rmid_forced", "value": "1"}],
                "seccompProfile": {"type": "RuntimeDefault"}},
            "containers": [{"name": "c", "image": "x", "securityContext": {"procMount": "Unmasked", "allowPrivilegeEscalation": false,
                "capabilities": {"drop": ["ALL"]}, "readOnlyRootFilesystem": true}}]});
        assert_eq!(pod(linux), Vec::<String>::new());
        let windows = json!({"os": {"name": "windows"}, "securityContext": {"windowsOptions": {"runAsUserName": "NT AUTHORITY\\SYSTEM",
                "gmsaCredentialSpecName": "webapp1", "gmsaCredentialSpec": "{}"}},
            "containers": [{"name": "c", "image": "mcr.microsoft.com/windows/servercore:ltsc2022"}]});
        assert_eq!(pod(windows), Vec::<String>::new());
    }
}
