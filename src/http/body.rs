//! Request bodies: read with a size limit and decoded from JSON, YAML or Kubernetes protobuf.

use bytes::Bytes;
use http_body_util::{BodyExt, Limited};

use crate::codec::{self, Decoded};
use crate::status::{ApiError, ApiResult};

/// Longest a client may take to send its body.
const BODY_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(60);

/// Largest accepted body: 3 MiB, etcd's default request limit.
pub const MAX_BODY: usize = 3 * 1024 * 1024;

/// Read a whole body, failing with 413 past the limit.
pub async fn read<B>(body: B) -> ApiResult<Bytes>
where
    B: http_body::Body<Data = Bytes> + Send,
    B::Error: std::error::Error + Send + Sync + 'static,
{
    let read = tokio::time::timeout(BODY_TIMEOUT, Limited::new(body, MAX_BODY).collect()).await;
    let Ok(read) = read else {
        return Err(ApiError::timeout("timed out reading the request body"));
    };
    match read {
        Ok(c) => Ok(c.to_bytes()),
        Err(e) if e.downcast_ref::<http_body_util::LengthLimitError>().is_some() => Err(ApiError::too_large(MAX_BODY)),
        Err(e) => Err(ApiError::bad_request(format!("reading the request body: {e}"))),
    }
}

/// Decode an object body by its Content-Type.
pub fn decode_object(content_type: Option<&str>, bytes: &[u8]) -> ApiResult<Decoded> {
    let ct = content_type.unwrap_or("application/json");
    let media = ct.split(';').next().unwrap_or("").trim();
    let d = match media {
        "application/vnd.kubernetes.protobuf" => {
            Decoded { value: crate::proto::decode(bytes)?, duplicates: Vec::new() }
        }
        "application/yaml" | "application/apply-patch+yaml" => codec::yaml_or_json(bytes)?,
        "application/json" | "" | "*/*" => {
            if bytes.iter().all(u8::is_ascii_whitespace) {
                return Err(ApiError::bad_request("the request body is empty"));
            }
            codec::json(bytes)?
        }
        other => {
            return Err(ApiError::unsupported_media_type(
                other,
                &["application/json", "application/yaml", "application/vnd.kubernetes.protobuf"],
            ))
        }
    };
    if !d.value.is_object() {
        return Err(ApiError::bad_request("the request body must be an object"));
    }
    Ok(d)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn json_yaml_and_garbage() {
        assert_eq!(decode_object(Some("application/json"), br#"{"a":1}"#).unwrap().value["a"], 1);
        assert_eq!(decode_object(Some("application/yaml"), b"a: 1\n").unwrap().value["a"], 1);
        assert_eq!(decode_object(Some("application/json"), b"{not json").unwrap_err().code, 400);
        assert_eq!(decode_object(Some("application/json"), b"[1]").unwrap_err().code, 400);
        assert_eq!(decode_object(Some("text/plain"), b"x").unwrap_err().code, 415);
        assert_eq!(decode_object(Some("application/vnd.kubernetes.protobuf"), b"nope").unwrap_err().code, 400);
    }
}
