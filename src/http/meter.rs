//! Every response body, wrapped on its way out: it keeps its request in flight on its connection (and
//! its exchange: what admitted it, see `edge::Exchange`) until its last byte is taken or the client goes, and it counts each
//! chunk as outstanding on the connection, and as bytes in flight of its account (`budget`), until the
//! chunk's bytes leave kgate. So the connection's rules (`conn`) can tell a client that stopped reading
//! from one that has nothing to read, and a tenant whose clients stop reading runs out of its own budget.

use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use bytes::Bytes;
use http_body::{Frame, SizeHint};

use super::conn::{Activity, InFlight};
use super::edge::Exchange;
use super::respond::Body;
use crate::budget::Charge;

/// A response body with what it holds while it is sent.
struct Metered {
    body: Body,
    /// The request's place on its connection.
    request: InFlight,
    /// What the request was admitted with (its place in flight, its account, its audit record).
    exchange: Arc<Exchange>,
}

/// A chunk handed to the connection: its drop, once the connection has written the bytes out (into
/// the TLS layer's buffer or the socket), is the connection's progress and gives its bytes back.
struct Chunk {
    data: Bytes,
    conn: Arc<Activity>,
    _charge: Option<Charge>,
}

impl AsRef<[u8]> for Chunk {
    fn as_ref(&self) -> &[u8] {
        &self.data
    }
}

impl Drop for Chunk {
    fn drop(&mut self) {
        self.conn.written(self.data.len() as u64);
    }
}

impl http_body::Body for Metered {
    type Data = Bytes;
    type Error = std::convert::Infallible;

    fn poll_frame(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Result<Frame<Bytes>, Self::Error>>> {
        let frame = match Pin::new(&mut self.body).poll_frame(cx) {
            Poll::Ready(Some(Ok(frame))) => frame,
            other => return other,
        };
        let frame = match frame.into_data() {
            Ok(data) if !data.is_empty() => {
                if let Some(record) = self.exchange.audit.get() {
                    record.sent(&data, self.exchange.account.get());
                }
                let conn = self.request.activity().clone();
                let n = data.len() as u64;
                conn.sent(n);
                let charge = self.exchange.account.get().map(|a| a.charge(n));
                Frame::data(Bytes::from_owner(Chunk { data, conn, _charge: charge }))
            }
            Ok(data) => Frame::data(data),
            Err(frame) => frame,
        };
        Poll::Ready(Some(Ok(frame)))
    }

    fn is_end_stream(&self) -> bool {
        self.body.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.body.size_hint()
    }
}

/// `resp` with its body metered, holding `request` and `exchange` until it is sent or dropped.
pub fn wrap(resp: http::Response<Body>, request: InFlight, exchange: Arc<Exchange>) -> http::Response<Body> {
    resp.map(|body| http_body_util::BodyExt::boxed_unsync(Metered { body, request, exchange }))
}

#[cfg(test)]
mod tests {
    use super::*;
    use http_body_util::BodyExt;

    #[tokio::test]
    async fn chunks_are_outstanding_until_dropped_and_the_request_until_the_body_goes() {
        let activity = Activity::new();
        let resp = wrap(super::super::respond::bytes(200, "text/plain", "hello"), activity.begin(), Default::default());
        assert_eq!(activity.snapshot().in_flight, 1);
        let mut body = resp.into_body();
        let chunk = body.frame().await.unwrap().unwrap().into_data().unwrap();
        assert_eq!(&chunk[..], b"hello");
        assert_eq!(activity.snapshot().outstanding, 5);
        drop(chunk);
        assert_eq!(activity.snapshot().outstanding, 0);
        assert!(body.frame().await.is_none());
        drop(body);
        assert_eq!(activity.snapshot().in_flight, 0);
    }
}
