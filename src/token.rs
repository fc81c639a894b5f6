//! ServiceAccount tokens: compact JWTs (HS256) signed by kgate, each bound to one logical cluster, one
//! ServiceAccount (by uid) and an expiry. The signing key lives in the store, so every replica on the
//! same etcd verifies every other replica's tokens.

use base64::engine::general_purpose::URL_SAFE_NO_PAD as B64;
use base64::Engine;
use hmac::{Hmac, Mac};
use serde::{Deserialize, Serialize};
use sha2::Sha256;

use crate::storage::{Store, StoreError};

/// The `iss` of kgate's tokens.
pub const ISSUER: &str = "kgate";

/// The audiences kgate's API accepts when none are configured: kube's in-cluster name for the API
/// server, and kgate's issuer (what tokens issued before audiences were kept named).
pub fn default_audiences() -> Vec<String> {
    vec!["https://kubernetes.default.svc".into(), ISSUER.into()]
}

/// Where the signing key is kept: `_` never appears in an API group, so no resource key can collide.
pub fn signing_key_path(prefix: &str) -> String {
    format!("{prefix}/_kgate/sa-signing-key")
}

/// What a token asserts.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Claims {
    /// Issuer (`kgate`).
    pub iss: String,
    /// `system:serviceaccount:<namespace>:<name>`.
    pub sub: String,
    /// The logical cluster the token is valid in, and nowhere else.
    pub cluster: String,
    /// Namespace of the ServiceAccount.
    pub ns: String,
    /// Name of the ServiceAccount.
    pub sa: String,
    /// uid of the ServiceAccount: a token outlives neither a deleted nor a re-created account.
    pub uid: String,
    /// Issued at (Unix seconds).
    pub iat: i64,
    /// Expiry (Unix seconds).
    pub exp: i64,
    /// The audiences it is for (`aud`). Tokens issued before kgate kept audiences have none, and were
    /// all for its API.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub aud: Vec<String>,
    /// The object the token is bound to: it is valid only while that object exists with that uid.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bound: Option<Bound>,
}

/// A token's bound object (`boundObjectRef`): a Pod or Secret in the ServiceAccount's namespace, or a Node.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Bound {
    /// `Pod`, `Secret` or `Node`.
    pub kind: String,
    /// Its name.
    pub name: String,
    /// Its uid when the token was issued.
    pub uid: String,
}

impl Claims {
    /// The audiences the token is for: its own, or for a token issued before audiences were kept, the
    /// API's (`api`), which were then the only ones.
    pub fn audiences<'a>(&'a self, api: &'a [String]) -> &'a [String] {
        if self.aud.is_empty() {
            api
        } else {
            &self.aud
        }
    }
}

/// Why a token was refused (all become 401).
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum TokenError {
    /// Not three base64url parts, or bad JSON.
    #[error("malformed token")]
    Malformed,
    /// Signature does not verify.
    #[error("invalid signature")]
    Signature,
    /// Past its expiry.
    #[error("token expired")]
    Expired,
}

/// Signs and verifies tokens with one HMAC key.
#[derive(Clone)]
pub struct Signer {
    key: Vec<u8>,
}

const HEADER: &str = r#"{"alg":"HS256","typ":"JWT"}"#;

impl Signer {
    /// A signer over a key.
    pub fn new(key: Vec<u8>) -> Self {
        Signer { key }
    }

    /// Load the key from the store, creating it on first start (compare-and-swap, so concurrent
    /// replicas agree on one key).
    pub async fn load_or_create(store: &dyn Store, prefix: &str) -> Result<Self, StoreError> {
        let path = signing_key_path(prefix);
        if let Some(kv) = store.get(&path).await? {
            return Ok(Signer::new(kv.value));
        }
        let key: [u8; 32] = rand::random();
        match store.create(&path, key.to_vec()).await {
            Ok(_) => Ok(Signer::new(key.to_vec())),
            Err(StoreError::AlreadyExists) => match store.get(&path).await? {
                Some(kv) => Ok(Signer::new(kv.value)),
                None => Err(StoreError::Internal("signing key vanished".into())),
            },
            Err(e) => Err(e),
        }
    }

    fn mac(&self, data: &[u8]) -> Hmac<Sha256> {
        let mut m = Hmac::<Sha256>::new_from_slice(&self.key).expect("HMAC takes any key length");
        m.update(data);
        m
    }

    /// Issue a token.
    pub fn sign(&self, claims: &Claims) -> String {
        let payload = serde_json::to_vec(claims).expect("claims serialise");
        let signing_input = format!("{}.{}", B64.encode(HEADER), B64.encode(payload));
        let sig = self.mac(signing_input.as_bytes()).finalize().into_bytes();
        format!("{signing_input}.{}", B64.encode(sig))
    }

    /// Verify a token's signature and expiry at `now` (Unix seconds).
    pub fn verify(&self, token: &str, now: i64) -> Result<Claims, TokenError> {
        let mut parts = token.split('.');
        let (Some(h), Some(p), Some(s), None) = (parts.next(), parts.next(), parts.next(), parts.next()) else {
            return Err(TokenError::Malformed);
        };
        let sig = B64.decode(s).map_err(|_| TokenError::Malformed)?;
        // Constant-time comparison through the MAC's own verify.
        self.mac(format!("{h}.{p}").as_bytes()).verify_slice(&sig).map_err(|_| TokenError::Signature)?;
        if B64.decode(h).ok().as_deref() != Some(HEADER.as_bytes()) {
            return Err(TokenError::Malformed);
        }
        let claims: Claims = serde_json::from_slice(&B64.decode(p).map_err(|_| TokenError::Malformed)?)
            .map_err(|_| TokenError::Malformed)?;
        if claims.exp <= now {
            return Err(TokenError::Expired);
        }
        Ok(claims)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn claims(exp: i64) -> Claims {
        Claims {
            iss: "kgate".into(),
            sub: "system:serviceaccount:default:bot".into(),
            cluster: "team-a".into(),
            ns: "default".into(),
            sa: "bot".into(),
            uid: "u1".into(),
            iat: 0,
            exp,
            aud: vec!["https://kubernetes.default.svc".into()],
            bound: Some(Bound { kind: "Pod".into(), name: "p".into(), uid: "pu".into() }),
        }
    }

    #[test]
    fn audiences_are_kept_and_tokens_without_them_are_for_the_api() {
        let s = Signer::new(vec![7; 32]);
        let api = vec!["kgate".to_string()];
        let t = s.verify(&s.sign(&claims(100)), 50).unwrap();
        assert_eq!(t.audiences(&api), ["https://kubernetes.default.svc".to_string()]);
        let old: Claims = serde_json::from_value(serde_json::json!({
            "iss": "kgate", "sub": "s", "cluster": "c", "ns": "n", "sa": "a", "uid": "u", "iat": 0, "exp": 1
        }))
        .unwrap();
        assert_eq!((old.audiences(&api), &old.bound), (&api[..], &None));
    }

    #[test]
    fn sign_verify_and_reject_tampering() {
        let s = Signer::new(vec![7; 32]);
        let t = s.sign(&claims(100));
        assert_eq!(s.verify(&t, 50).unwrap(), claims(100));
        assert_eq!(s.verify(&t, 100), Err(TokenError::Expired));
        assert_eq!(Signer::new(vec![8; 32]).verify(&t, 50), Err(TokenError::Signature));
        // Re-bind the payload to another cluster: the signature no longer matches.
        let mut parts: Vec<String> = t.split('.').map(str::to_string).collect();
        let mut c = claims(100);
        c.cluster = "team-b".into();
        parts[1] = B64.encode(serde_json::to_vec(&c).unwrap());
        assert_eq!(s.verify(&parts.join("."), 50), Err(TokenError::Signature));
        assert_eq!(s.verify("a.b", 50), Err(TokenError::Malformed));
        assert_eq!(s.verify("", 50), Err(TokenError::Malformed));
    }
}
