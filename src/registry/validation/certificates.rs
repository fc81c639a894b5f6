//! kube's checks of a CertificateSigningRequest as created (kube 1.33's
//! `pkg/apis/certificates/validation`): a PEM-encoded PKCS#10 request, a signer name, known usages
//! once each, an expiration of ten minutes or more.

use super::flowcontrol::{dns1123_label_errors, dns1123_subdomain_errors};
use super::*;
use base64::Engine as _;

/// The key usages a request may ask for (kube's `allValidUsages`, sorted as kube lists a set).
const USAGES: &[&str] = &[
    "any",
    "cert sign",
    "client auth",
    "code signing",
    "content commitment",
    "crl sign",
    "data encipherment",
    "decipher only",
    "digital signature",
    "email protection",
    "encipher only",
    "ipsec end system",
    "ipsec tunnel",
    "ipsec user",
    "key agreement",
    "key encipherment",
    "microsoft sgc",
    "netscape sgc",
    "ocsp signing",
    "s/mime",
    "server auth",
    "signing",
    "timestamping",
];

/// The signer only v1beta1 took (kube's `LegacyUnknownSignerName`).
const LEGACY_SIGNER: &str = "kubernetes.io/legacy-unknown";

/// A CertificateSigningRequest as created (kube's `ValidateCertificateSigningRequestCreate`). Its
/// status (conditions, certificate) is the subresources' to check: kube clears it on creates. Nor do
/// updates of the object itself meet these checks: kube keeps the stored spec and status, whatever
/// the body says, and validates those.
pub(super) fn certificate_signing_request(obj: &Value, causes: &mut Vec<Cause>) {
    let spec = &obj["spec"];
    if let Some((bytes, why)) = request_problem(spec.get("request")) {
        invalid(causes, "spec.request".into(), bytes, &why);
    }
    let usages = spec["usages"].as_array().map_or(&[][..], Vec::as_slice);
    if usages.is_empty() {
        required(causes, "spec.usages".into());
    }
    for (i, usage) in usages.iter().enumerate() {
        if !usage.as_str().is_some_and(|u| USAGES.contains(&u)) {
            not_supported(causes, format!("spec.usages[{i}]"), usage, USAGES);
        }
    }
    let mut seen = HashSet::new();
    for (i, usage) in usages.iter().enumerate() {
        let usage = usage.as_str().unwrap_or_default();
        if !seen.insert(usage) {
            duplicate(causes, &format!("spec.usages[{i}]"), usage);
        }
    }
    let signer = spec["signerName"].as_str().unwrap_or_default();
    if signer == LEGACY_SIGNER {
        let why = "the legacy signerName is not allowed via this API version";
        invalid(causes, "spec.signerName".into(), format!("{signer:?}"), why);
    } else {
        signer_name(signer, "spec.signerName", causes);
    }
    if let Some(n) = spec["expirationSeconds"].as_i64().filter(|n| *n < 600) {
        let why = "may not specify a duration less than 600 seconds (10 minutes)";
        invalid(causes, "spec.expirationSeconds".into(), n.to_string(), why);
    }
}

/// A signer's name, `example.com/path` (kube's `ValidateSignerName`): a domain of two labels or
/// more, a path of DNS subdomains joined by dots. Of each part kube reports its first bad label.
pub(super) fn signer_name(signer: &str, at: &str, causes: &mut Vec<Cause>) {
    let too_long = |causes: &mut Vec<Cause>, max: usize| {
        push(causes, cause("FieldValueTooLong", at, format!("Too long: may not be more than {max} bytes")));
    };
    if signer.is_empty() {
        return required(causes, at.to_string());
    }
    let Some((domain, path)) = signer.split_once('/').filter(|(_, path)| !path.contains('/')) else {
        let why = "must be a fully qualified domain and path of the form 'example.com/signer-name'";
        return invalid(causes, at.to_string(), format!("{signer:?}"), why);
    };
    if domain.len() > 253 {
        too_long(causes, 253);
    }
    let labels: Vec<&str> = domain.split('.').collect();
    if let Some((label, errs)) = labels.iter().map(|l| (l, dns1123_label_errors(l))).find(|(_, e)| !e.is_empty()) {
        for why in errs {
            invalid(causes, at.to_string(), format!("{domain:?}"), &format!("validating label {label:?}: {why}"));
        }
    }
    if labels.len() < 2 {
        let why = "should be a domain with at least two segments separated by dots";
        invalid(causes, at.to_string(), format!("{domain:?}"), why);
    }
    if let Some((label, errs)) = path.split('.').map(|l| (l, dns1123_subdomain_errors(l))).find(|(_, e)| !e.is_empty())
    {
        for why in errs {
            invalid(causes, at.to_string(), format!("{path:?}"), &format!("validating label {label:?}: {why}"));
        }
    }
    // A domain, then a namespace and a resource's name: `<fqdn>/<namespace>.<name>`.
    const MAX: usize = 253 + 1 + 63 + 1 + 253;
    if signer.len() > MAX {
        too_long(causes, MAX);
    }
}

/// What kube says of a request that is no PEM-encoded PKCS#10 request: its bytes as Go shows them,
/// and why. None for a request that parses, or one that is no base64: kube refuses that as it
/// decodes the body, before it validates, with no field's words.
fn request_problem(request: Option<&Value>) -> Option<(String, String)> {
    let bytes = match request {
        None | Some(Value::Null) => None,
        Some(Value::String(s)) => {
            // Go's base64 skips line breaks.
            let text: String = s.chars().filter(|c| !matches!(c, '\r' | '\n')).collect();
            Some(base64::engine::general_purpose::STANDARD.decode(text).ok()?)
        }
        Some(_) => return None,
    };
    let why = parse_request(bytes.as_deref().unwrap_or_default()).err()?;
    Some((go_bytes(bytes.as_deref()), why))
}

/// Bytes of a refused request shown: kube shows them all, six characters each, which would make a
/// request of megabytes an answer several times larger.
const SHOWN_BYTES: usize = 64;

/// Go's `%#v` of a byte slice, which kube shows for a request it refuses (its first `SHOWN_BYTES`).
fn go_bytes(bytes: Option<&[u8]>) -> String {
    let Some(b) = bytes else { return "[]byte(nil)".to_string() };
    let mut shown: Vec<String> = b.iter().take(SHOWN_BYTES).map(|c| format!("{c:#x}")).collect();
    if b.len() > SHOWN_BYTES {
        shown.push("...".to_string());
    }
    format!("[]byte{{{}}}", shown.join(", "))
}

/// kube's `ParseCSR`: the first PEM block, of type CERTIFICATE REQUEST, holding a DER request and
/// nothing after it, signed by its own key. Go's words for DER it cannot read are its ASN.1 decoder's: truncated
/// and trailing data are worded as Go words them, other faults as x509-parser does.
fn parse_request(pem: &[u8]) -> Result<(), String> {
    use x509_parser::certification_request::X509CertificationRequest;
    use x509_parser::nom::Err as NomErr;
    use x509_parser::prelude::FromDer;
    let block = match x509_parser::pem::parse_x509_pem(pem) {
        Ok((_, block)) if block.label == "CERTIFICATE REQUEST" => block,
        _ => return Err("PEM block type must be CERTIFICATE REQUEST".to_string()),
    };
    match X509CertificationRequest::from_der(&block.contents) {
        Ok(([], request)) => signature_problem(&request).map_or(Ok(()), Err),
        Ok(_) => Err("asn1: syntax error: trailing data".to_string()),
        Err(NomErr::Incomplete(_)) => Err("asn1: syntax error: data truncated".to_string()),
        Err(NomErr::Error(e) | NomErr::Failure(e)) => Err(e.to_string()),
    }
}

/// Why a request's signature does not hold, in Go's words (`CheckSignature`): a request must be
/// signed by the key it asks a certificate for. An algorithm the verifier here does not know (RSA-PSS)
/// is let through rather than refused where kube would take it.
fn signature_problem(request: &x509_parser::certification_request::X509CertificationRequest<'_>) -> Option<String> {
    use x509_parser::error::X509Error;
    match request.verify_signature() {
        Err(X509Error::SignatureVerificationError) => {}
        _ => return None,
    }
    let key = &request.certification_request_info.subject_pki;
    // The verifier here takes RSA keys of 2048 to 8192 bits; Go takes others that kube passes.
    if let Ok(x509_parser::public_key::PublicKey::RSA(rsa)) = key.parsed() {
        if !(2048..=8192).contains(&rsa.key_size()) {
            return None;
        }
    }
    let algorithm = key.algorithm.algorithm.to_id_string();
    Some(
        match algorithm.as_str() {
            "1.2.840.113549.1.1.1" => "crypto/rsa: verification error",
            "1.2.840.10045.2.1" => "x509: ECDSA verification failure",
            "1.3.101.112" => "x509: Ed25519 verification failure",
            _ => "x509: signature verification failure",
        }
        .to_string(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn b64(bytes: &[u8]) -> String {
        base64::engine::general_purpose::STANDARD.encode(bytes)
    }

    fn csr(request: Option<String>, signer: &str, usages: Value) -> Value {
        let mut obj = json!({"metadata": {"name": "system:node:n1"},
            "spec": {"signerName": signer, "usages": usages}});
        if let Some(request) = request {
            obj["spec"]["request"] = json!(request);
        }
        obj
    }

    fn messages(obj: Value) -> Vec<String> {
        super::super::testing::check(certificate_signing_request, obj)
    }

    /// A signed request for `example.com`, as PEM and as DER.
    fn request() -> (String, Vec<u8>) {
        let key = rcgen::KeyPair::generate().expect("key");
        let params = rcgen::CertificateParams::new(vec!["example.com".to_string()]).expect("params");
        let csr = params.serialize_request(&key).expect("request");
        (csr.pem().expect("pem"), csr.der().to_vec())
    }

    #[test]
    fn a_request_is_a_pem_encoded_pkcs10_request() {
        let (pem, der) = request();
        let usages = json!(["digital signature", "client auth"]);
        let good = csr(Some(b64(pem.as_bytes())), "example.com/my-signer", usages.clone());
        assert_eq!(messages(good), Vec::<String>::new());

        let hello = csr(Some(b64(b"hello")), "example.com/my-signer", usages.clone());
        assert_eq!(
            messages(hello),
            ["spec.request: Invalid value: []byte{0x68, 0x65, 0x6c, 0x6c, 0x6f}: PEM block type must be CERTIFICATE REQUEST"]
        );
        let missing = csr(None, "example.com/my-signer", usages.clone());
        assert_eq!(
            messages(missing),
            ["spec.request: Invalid value: []byte(nil): PEM block type must be CERTIFICATE REQUEST"]
        );
        let certificate = pem.replace("CERTIFICATE REQUEST", "CERTIFICATE");
        let got = messages(csr(Some(b64(certificate.as_bytes())), "example.com/my-signer", usages.clone()));
        assert!(got[0].ends_with("}: PEM block type must be CERTIFICATE REQUEST"), "{got:?}");
        assert_eq!(got.len(), 1);

        let mut trailing = der;
        trailing.push(0);
        let pem =
            format!("-----BEGIN CERTIFICATE REQUEST-----\n{}\n-----END CERTIFICATE REQUEST-----\n", b64(&trailing));
        let got = messages(csr(Some(b64(pem.as_bytes())), "example.com/my-signer", usages));
        assert_eq!(got.len(), 1);
        assert!(
            got[0].starts_with("spec.request: Invalid value: []byte{0x2d, 0x2d, 0x2d, 0x2d, 0x2d, 0x42"),
            "{got:?}"
        );
        assert!(got[0].ends_with(": asn1: syntax error: trailing data"), "{got:?}");

        // A request signed by another key than the one it names is no request of that key's owner.
        let (_, mut forged) = request();
        let last = forged.len() - 1;
        forged[last] ^= 1;
        let pem = format!("-----BEGIN CERTIFICATE REQUEST-----\n{}\n-----END CERTIFICATE REQUEST-----\n", b64(&forged));
        let got = messages(csr(Some(b64(pem.as_bytes())), "example.com/my-signer", json!(["any"])));
        assert_eq!(got.len(), 1, "{got:?}");
        assert!(got[0].ends_with("...}: x509: ECDSA verification failure"), "{got:?}");
    }

    #[test]
    fn usages_signer_and_expiration() {
        let (pem, _) = request();
        let request = Some(b64(pem.as_bytes()));
        let mut obj =
            csr(request.clone(), "Example/signer/x", json!(["digital signature", "sign", "digital signature"]));
        obj["spec"]["expirationSeconds"] = json!(599);
        let supported: Vec<String> = USAGES.iter().map(|u| format!("{u:?}")).collect();
        assert_eq!(
            messages(obj),
            [
                format!("spec.usages[1]: Unsupported value: \"sign\": supported values: {}", supported.join(", ")),
                "spec.usages[2]: Duplicate value: \"digital signature\"".into(),
                "spec.signerName: Invalid value: \"Example/signer/x\": must be a fully qualified domain and path of the form 'example.com/signer-name'".into(),
                "spec.expirationSeconds: Invalid value: 599: may not specify a duration less than 600 seconds (10 minutes)".into(),
            ]
        );
        let signer = |name: &str| messages(csr(request.clone(), name, json!(["any"])));
        assert_eq!(signer(""), ["spec.signerName: Required value"]);
        assert_eq!(
            signer(LEGACY_SIGNER),
            ["spec.signerName: Invalid value: \"kubernetes.io/legacy-unknown\": the legacy signerName is not allowed via this API version"]
        );
        assert_eq!(
            signer("example/signer"),
            ["spec.signerName: Invalid value: \"example\": should be a domain with at least two segments separated by dots"]
        );
        let label = meta::validate_dns1123_label("Example").unwrap_err();
        assert_eq!(
            signer("Example.com/x"),
            [format!("spec.signerName: Invalid value: \"Example.com\": validating label \"Example\": {label}")]
        );
        let subdomain = meta::validate_dns1123_subdomain("").unwrap_err();
        assert_eq!(
            signer("example.com/"),
            [format!("spec.signerName: Invalid value: \"\": validating label \"\": {subdomain}")]
        );
        assert_eq!(signer("kubernetes.io/kube-apiserver-client"), Vec::<String>::new());
        let long = format!("example.com/{}", ["a".repeat(250), "b".repeat(250), "c".repeat(80)].join("."));
        assert_eq!(signer(&long), ["spec.signerName: Too long: may not be more than 571 bytes"]);
        assert_eq!(messages(csr(request, "example.com/s", json!([]))), ["spec.usages: Required value"]);
        assert!(USAGES.windows(2).all(|w| w[0] < w[1]));
    }
}
