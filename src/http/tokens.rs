//! ServiceAccount tokens at the edge, as kube-apiserver handles them: reading the bearer token of a
//! request, authenticating it (its cluster, its ServiceAccount, its audiences, its bound object),
//! issuing one (`serviceaccounts/<name>/token`, TokenRequest) and reviewing one (TokenReview).

use serde_json::{json, Value};

use super::handler::AppState;
use crate::auth::Identity;
use crate::registry::Ctx;
use crate::status::{cause, ApiError, ApiResult};
use crate::token::{Bound, Claims};

pub use crate::token::default_audiences;
use crate::token::ISSUER;

/// Shortest lifetime a TokenRequest may ask for (kube: 10 minutes).
const MIN_SECONDS: i64 = 600;
/// Longest lifetime a TokenRequest may ask for before validation refuses it (kube: 2^32 seconds).
const MAX_SECONDS: i64 = 1 << 32;
/// Longest lifetime issued: longer requests are shortened with a warning, as kube-apiserver does with
/// `--service-account-max-token-expiration`.
const ISSUED_MAX_SECONDS: i64 = 366 * 24 * 3600;
/// Lifetime when none is asked for.
const DEFAULT_SECONDS: i64 = 3600;

/// The bearer token of an `Authorization` header, as kube-apiserver reads it: the header trimmed and cut
/// at its first two spaces, the scheme in any case, the token what lies between; `None` when there is
/// none (a header with two spaces after the scheme is ignored, as kube ignores it).
pub fn bearer(header: Option<&str>) -> Option<&str> {
    let mut parts = header?.trim().splitn(3, ' ');
    let (scheme, token) = (parts.next()?, parts.next()?);
    (scheme.eq_ignore_ascii_case("bearer") && !token.is_empty()).then_some(token)
}

/// Why a token does not authenticate (all are 401 to the client, or a TokenReview's `status.error`).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Unauthenticated {
    /// Not a token of this server, or expired.
    #[error("invalid bearer token")]
    Invalid,
    /// Issued for another logical cluster.
    #[error("the token is for another logical cluster")]
    OtherCluster,
    /// For none of the audiences wanted.
    #[error("token audiences {token:?} is invalid for the target audiences {wanted:?}")]
    Audience {
        /// The token's.
        token: Vec<String>,
        /// The ones it had to name one of.
        wanted: Vec<String>,
    },
    /// Its ServiceAccount, or the object it is bound to, is gone (or was recreated).
    #[error("service account token has been invalidated")]
    Invalidated,
}

/// Authenticate a ServiceAccount token for `cluster` and `audiences`: valid only in the cluster it was
/// issued in, while its ServiceAccount (same uid) and its bound object (same uid) exist, before it
/// expires, and for one of the audiences. Returns the identity and the audiences it matched.
pub async fn authenticate(
    state: &AppState,
    token: &str,
    cluster: Option<&str>,
    audiences: &[String],
) -> ApiResult<Result<(Identity, Vec<String>), Unauthenticated>> {
    let Ok(claims) = state.signer.verify(token, chrono::Utc::now().timestamp()) else {
        return Ok(Err(Unauthenticated::Invalid));
    };
    if cluster != Some(claims.cluster.as_str()) {
        return Ok(Err(Unauthenticated::OtherCluster));
    }
    let matched = matching(claims.audiences(&state.audiences), audiences);
    if matched.is_empty() {
        let token = claims.audiences(&state.audiences).to_vec();
        return Ok(Err(Unauthenticated::Audience { token, wanted: audiences.to_vec() }));
    }
    if !state.token_checks.holds(&claims) {
        let epoch = state.token_checks.epoch(&claims);
        let uid_of = |v: Option<Value>| v.and_then(|o| o["metadata"]["uid"].as_str().map(str::to_string));
        let account = stored(state, &claims.cluster, "serviceaccounts", Some(&claims.ns), &claims.sa).await?;
        if uid_of(account).as_deref() != Some(claims.uid.as_str()) {
            return Ok(Err(Unauthenticated::Invalidated));
        }
        if let Some(b) = &claims.bound {
            let (plural, ns) = bound_location(&b.kind, &claims.ns);
            if uid_of(stored(state, &claims.cluster, plural, ns, &b.name).await?).as_deref() != Some(b.uid.as_str()) {
                return Ok(Err(Unauthenticated::Invalidated));
            }
        }
        state.token_checks.passed(&claims, epoch);
    }
    let identity = Identity {
        user: claims.sub,
        groups: vec![
            "system:serviceaccounts".into(),
            format!("system:serviceaccounts:{}", claims.ns),
            "system:authenticated".into(),
        ],
    };
    Ok(Ok((identity, matched)))
}

/// The token's audiences that are wanted, in the token's order: through a set, as both lists are the
/// requester's to make long (a TokenRequest's and a TokenReview's).
fn matching(token: &[String], wanted: &[String]) -> Vec<String> {
    let wanted: std::collections::HashSet<&String> = wanted.iter().collect();
    token.iter().filter(|a| wanted.contains(a)).cloned().collect()
}

/// The stored core object `plural`/`name` of `cluster`, read from the store itself: a token's checks
/// see the objects as they are now, not as a cache last saw them (and are then remembered until one
/// of them may have gone: see `token_checks`).
async fn stored(
    state: &AppState,
    cluster: &str,
    plural: &str,
    ns: Option<&str>,
    name: &str,
) -> ApiResult<Option<Value>> {
    let registry = &state.serving(cluster).await?.registry;
    let key = crate::storage::keys::object(&registry.prefix, "core", plural, cluster, ns, name);
    Ok(registry.store.get(&key).await?.and_then(|kv| serde_json::from_slice(&kv.value).ok()))
}

/// Where a bound object of `kind` lives: its resource, and the namespace (the ServiceAccount's) for
/// namespaced kinds.
fn bound_location<'a>(kind: &str, namespace: &'a str) -> (&'static str, Option<&'a str>) {
    match kind {
        "Pod" => ("pods", Some(namespace)),
        "Secret" => ("secrets", Some(namespace)),
        _ => ("nodes", None),
    }
}

/// A TokenRequest's spec, checked as kube-apiserver decodes and validates it.
#[derive(Debug)]
struct Spec {
    seconds: i64,
    audiences: Vec<String>,
    bound: Option<(String, String, Option<String>)>,
}

/// What Go's decoder says of a field of the wrong JSON type.
fn wrong_type(field: &str, go_type: &str, v: &Value) -> ApiError {
    let found = match v {
        Value::String(_) => "string".to_string(),
        Value::Number(n) => format!("number {n}"),
        Value::Bool(_) => "bool".to_string(),
        Value::Array(_) => "array".to_string(),
        _ => "object".to_string(),
    };
    ApiError::bad_request(format!(
        "TokenRequest in version \"v1\" cannot be handled as a TokenRequest: json: cannot unmarshal {found} into Go struct field {field} of type {go_type}"
    ))
}

fn spec(req: &Value, default_audiences: &[String]) -> ApiResult<Spec> {
    let spec = &req["spec"];
    let invalid = |field: &str, message: String| {
        ApiError::invalid("TokenRequest", "authentication.k8s.io", "", vec![cause("FieldValueInvalid", field, message)])
    };
    let seconds = match &spec["expirationSeconds"] {
        Value::Null => DEFAULT_SECONDS,
        v => v.as_i64().ok_or_else(|| wrong_type("TokenRequestSpec.spec.expirationSeconds", "int64", v))?,
    };
    if seconds < MIN_SECONDS {
        return Err(invalid(
            "spec.expirationSeconds",
            format!("Invalid value: {seconds}: may not specify a duration less than 10 minutes"),
        ));
    }
    if seconds > MAX_SECONDS {
        return Err(invalid(
            "spec.expirationSeconds",
            format!("Invalid value: {seconds}: may not specify a duration larger than 2^32 seconds"),
        ));
    }
    let audiences = match &spec["audiences"] {
        Value::Null => Vec::new(),
        Value::Array(items) => items
            .iter()
            .map(|a| {
                a.as_str().map(str::to_string).ok_or_else(|| wrong_type("TokenRequestSpec.spec.audiences", "string", a))
            })
            .collect::<ApiResult<_>>()?,
        other => return Err(wrong_type("TokenRequestSpec.spec.audiences", "[]string", other)),
    };
    let audiences = if audiences.is_empty() { default_audiences.to_vec() } else { audiences };
    let bound = match &spec["boundObjectRef"] {
        Value::Null => None,
        r => {
            let text = |k: &str| r[k].as_str().unwrap_or_default().to_string();
            let kind = text("kind");
            if !matches!(kind.as_str(), "Pod" | "Secret" | "Node") {
                return Err(invalid(
                    "spec.boundObjectRef.kind",
                    format!("Unsupported value: {kind:?}: supported values: \"Pod\", \"Secret\", \"Node\""),
                ));
            }
            if text("name").is_empty() {
                return Err(ApiError::invalid(
                    "TokenRequest",
                    "authentication.k8s.io",
                    "",
                    vec![cause("FieldValueRequired", "spec.boundObjectRef.name", "Required value")],
                ));
            }
            let group = text("apiVersion").split_once('/').map(|(g, _)| g.to_string()).unwrap_or_default();
            if !group.is_empty() {
                return Err(invalid(
                    "spec.boundObjectRef.apiVersion",
                    format!("Unsupported value: {:?}: supported values: \"v1\"", text("apiVersion")),
                ));
            }
            Some((kind, text("name"), r["uid"].as_str().filter(|u| !u.is_empty()).map(str::to_string)))
        }
    };
    Ok(Spec { seconds, audiences, bound })
}

/// `POST .../serviceaccounts/<name>/token` (`kubectl create token`): a token for this cluster and this
/// ServiceAccount's uid, for the audiences asked for (the API's by default), bound to a Pod, Secret or
/// Node if asked (which must exist, and whose deletion ends the token).
pub async fn request(state: &AppState, ctx: &Ctx<'_>, name: &str, req: &Value) -> ApiResult<(Value, Vec<String>)> {
    let spec = spec(req, &state.audiences)?;
    let sa = state.serving(ctx.cluster).await?.registry.get(ctx, name).await?;
    let uid = crate::meta::meta_str(&sa, "uid").unwrap_or_default().to_string();
    let ns = ctx.namespace.unwrap_or_default().to_string();
    let bound = match &spec.bound {
        None => None,
        Some((kind, object, want_uid)) => {
            let (plural, object_ns) = bound_location(kind, &ns);
            let def = crate::resources::find("", "v1", plural);
            let found = stored(state, ctx.cluster, plural, object_ns, object).await?;
            let Some(found) = found.filter(|_| def.is_some()) else {
                return Err(ApiError::not_found(plural, "", object));
            };
            // A Pod runs as one account: a token of another may not be bound to it.
            let runs_as = found["spec"]["serviceAccountName"].as_str().filter(|s| !s.is_empty()).unwrap_or("default");
            if kind == "Pod" && runs_as != name {
                return Err(ApiError::bad_request(format!(
                    "cannot bind token for serviceaccount {name:?} to pod running with different serviceaccount name."
                )));
            }
            let uid = crate::meta::meta_str(&found, "uid").unwrap_or_default().to_string();
            if want_uid.as_ref().is_some_and(|w| *w != uid) {
                return Err(ApiError::conflict(
                    plural,
                    "",
                    object,
                    &format!(
                        "the UID in the bound object reference ({}) does not match the UID in record. The object might have been deleted and then recreated",
                        want_uid.as_deref().unwrap_or_default()
                    ),
                ));
            }
            Some(Bound { kind: kind.clone(), name: object.clone(), uid })
        }
    };
    let mut warnings = Vec::new();
    let seconds = if spec.seconds > ISSUED_MAX_SECONDS {
        warnings.push(format!(
            "requested expiration of {} seconds shortened to {ISSUED_MAX_SECONDS} seconds",
            spec.seconds
        ));
        ISSUED_MAX_SECONDS
    } else {
        spec.seconds
    };
    let now = chrono::Utc::now();
    let claims = Claims {
        iss: ISSUER.into(),
        sub: format!("system:serviceaccount:{ns}:{name}"),
        cluster: ctx.cluster.to_string(),
        ns: ns.clone(),
        sa: name.to_string(),
        uid,
        iat: now.timestamp(),
        exp: now.timestamp() + seconds,
        aud: spec.audiences.clone(),
        bound,
    };
    let token = state.signer.sign(&claims);
    let expires = (now + chrono::Duration::seconds(seconds)).format("%Y-%m-%dT%H:%M:%SZ").to_string();
    let mut out_spec = req.get("spec").cloned().unwrap_or(json!({}));
    out_spec["expirationSeconds"] = json!(seconds);
    out_spec["audiences"] = json!(spec.audiences);
    let answer = json!({
        "kind": "TokenRequest", "apiVersion": "authentication.k8s.io/v1",
        "metadata": {"name": name, "namespace": ns, "creationTimestamp": crate::meta::now_rfc3339()},
        "spec": out_spec,
        "status": {"token": token, "expirationTimestamp": expires},
    });
    Ok((answer, warnings))
}

/// TokenReview (`authentication.k8s.io/v1`, create only): whether `spec.token` authenticates in this
/// cluster for `spec.audiences` (the API's when none), and as whom.
pub async fn review(state: &AppState, cluster: &str, mut obj: Value) -> ApiResult<Value> {
    let token = obj["spec"]["token"].as_str().unwrap_or_default().to_string();
    if token.is_empty() {
        return Err(ApiError::bad_request("token is required for TokenReview in authentication"));
    }
    let wanted: Vec<String> = match obj["spec"]["audiences"].as_array() {
        Some(a) if !a.is_empty() => a.iter().filter_map(Value::as_str).map(str::to_string).collect(),
        _ => state.audiences.clone(),
    };
    obj["status"] = match authenticate(state, &token, Some(cluster), &wanted).await? {
        Ok((who, audiences)) => json!({
            "authenticated": true,
            "user": {"username": who.user, "groups": who.groups},
            "audiences": audiences,
        }),
        Err(why) => json!({"user": {}, "error": why.to_string()}),
    };
    obj["metadata"] = json!({"creationTimestamp": null});
    Ok(obj)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn audiences_match_in_the_tokens_order() {
        let v = |l: &[&str]| l.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        assert_eq!(matching(&v(&["b", "a", "c"]), &v(&["c", "b", "x"])), v(&["b", "c"]));
        assert!(matching(&v(&["a"]), &v(&[])).is_empty());
        // A hundred thousand against a hundred thousand, none alike: a pass over each, not their product.
        let many = |p: &str| (0..100_000).map(|i| format!("{p}{i}")).collect::<Vec<_>>();
        assert!(matching(&many("t"), &many("w")).is_empty());
    }

    #[test]
    fn the_bearer_scheme_is_read_in_any_case_with_one_space() {
        assert_eq!(bearer(Some("Bearer abc")), Some("abc"));
        assert_eq!(bearer(Some("bearer abc")), Some("abc"));
        assert_eq!(bearer(Some("BEARER abc ")), Some("abc"));
        assert_eq!(bearer(Some("Bearer  abc")), None);
        assert_eq!(bearer(Some("Bearer abc def")), Some("abc"));
        assert_eq!(bearer(Some("Basic abc")), None);
        assert_eq!(bearer(Some("Bearer")), None);
        assert_eq!(bearer(None), None);
    }

    #[test]
    fn a_token_requests_spec_is_checked_as_kube_decodes_it() {
        let api = default_audiences();
        let s = spec(&json!({"spec": {}}), &api).unwrap();
        assert_eq!((s.seconds, s.audiences, s.bound), (3600, api.clone(), None));
        let e = spec(&json!({"spec": {"expirationSeconds": "600"}}), &api).unwrap_err();
        assert_eq!(e.code, 400);
        assert!(e.message.ends_with("json: cannot unmarshal string into Go struct field TokenRequestSpec.spec.expirationSeconds of type int64"), "{}", e.message);
        let e = spec(&json!({"spec": {"expirationSeconds": 600.5}}), &api).unwrap_err();
        assert!(e.message.contains("cannot unmarshal number 600.5 into"), "{}", e.message);
        let e = spec(&json!({"spec": {"expirationSeconds": 599}}), &api).unwrap_err();
        assert_eq!((e.code, e.message.as_str()), (422, "TokenRequest.authentication.k8s.io \"\" is invalid: spec.expirationSeconds: Invalid value: 599: may not specify a duration less than 10 minutes"));
        assert_eq!(spec(&json!({"spec": {"expirationSeconds": 1_i64 << 33}}), &api).unwrap_err().code, 422);
        let s = spec(&json!({"spec": {"audiences": ["vault"], "boundObjectRef": {"kind": "Pod", "apiVersion": "v1", "name": "p"}}}), &api).unwrap();
        assert_eq!((s.audiences, s.bound), (vec!["vault".to_string()], Some(("Pod".into(), "p".into(), None))));
        assert_eq!(
            spec(&json!({"spec": {"boundObjectRef": {"kind": "ConfigMap", "name": "c"}}}), &api).unwrap_err().code,
            422
        );
    }
}
