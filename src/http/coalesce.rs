//! Write coalescing between HTTP and TLS: a flush is held back for one turn of the connection's task
//! so that the DATA frames h2 writes one at a time leave in large writes.
//!
//! h2 flushes after every DATA frame (hyperium/h2#902). Over TLS that is one 16 KiB record, one
//! syscall and one wakeup of the reader per frame: a 4 MiB list took about 270 of each, and that, not
//! building the list, was most of its time. Go's HTTP/2 server flushes only when it has nothing left
//! to write; this layer gets that behaviour without changing h2. The first flush after new bytes
//! returns at once, holds the bytes and wakes the task. The task comes back, writes whatever it had
//! ready (which holds the flush again), and once it flushes with nothing new written it has nothing
//! more for now: the bytes go out then. The cost is one extra poll of the task; the bytes are never
//! held across a return to the runtime without that wakeup pending, so nothing waits on a timer.

use std::io::{self, IoSlice};
use std::pin::Pin;
use std::task::{ready, Context, Poll};

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

/// Bytes held before they are written whatever the flushes say: large enough that a list goes out in a
/// few dozen writes, small enough that a connection's buffer stays modest.
pub const LIMIT: usize = 256 * 1024;
/// Capacity kept once the buffer is empty; a connection that sent a large response does not keep
/// its buffer while it idles (thousands of watch connections do).
const KEEP: usize = 4 * 1024;

/// An I/O object whose writes are gathered and whose flushes are held back for one turn of the task.
pub struct Coalesce<T> {
    inner: T,
    /// Bytes accepted and not yet written to `inner`; `buf[..sent]` has been written.
    buf: Vec<u8>,
    sent: usize,
    /// A flush was answered without writing, and the task was woken to flush again.
    held: bool,
}

impl<T> Coalesce<T> {
    /// Wrap `inner`.
    pub fn new(inner: T) -> Self {
        Coalesce { inner, buf: Vec::new(), sent: 0, held: false }
    }
}

impl<T: AsyncWrite + Unpin> Coalesce<T> {
    /// Write every held byte to `inner` (without flushing it).
    fn poll_drain(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        while self.sent < self.buf.len() {
            let n = ready!(Pin::new(&mut self.inner).poll_write(cx, &self.buf[self.sent..]))?;
            if n == 0 {
                return Poll::Ready(Err(io::ErrorKind::WriteZero.into()));
            }
            self.sent += n;
        }
        self.sent = 0;
        if self.buf.capacity() > KEEP {
            self.buf = Vec::new();
        } else {
            self.buf.clear();
        }
        Poll::Ready(Ok(()))
    }

    /// Make room for `len` more bytes; `Ready(true)` if they should bypass the buffer (too large to
    /// gain from copying).
    fn poll_room(&mut self, cx: &mut Context<'_>, len: usize) -> Poll<io::Result<bool>> {
        if self.buf.len() + len > LIMIT {
            ready!(self.poll_drain(cx))?;
        }
        Poll::Ready(Ok(len >= LIMIT))
    }
}

impl<T: AsyncRead + Unpin> AsyncRead for Coalesce<T> {
    fn poll_read(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().inner).poll_read(cx, buf)
    }
}

impl<T: AsyncWrite + Unpin> AsyncWrite for Coalesce<T> {
    fn poll_write(self: Pin<&mut Self>, cx: &mut Context<'_>, data: &[u8]) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        if ready!(this.poll_room(cx, data.len()))? {
            return Pin::new(&mut this.inner).poll_write(cx, data);
        }
        this.buf.extend_from_slice(data);
        this.held = false;
        Poll::Ready(Ok(data.len()))
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        let len = bufs.iter().map(|b| b.len()).sum();
        if ready!(this.poll_room(cx, len))? {
            return Pin::new(&mut this.inner).poll_write_vectored(cx, bufs);
        }
        for b in bufs {
            this.buf.extend_from_slice(b);
        }
        this.held = false;
        Poll::Ready(Ok(len))
    }

    fn is_write_vectored(&self) -> bool {
        // h2 then chains frame payloads rather than copying them into its own buffer first.
        true
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        if this.sent < this.buf.len() && !this.held {
            this.held = true;
            cx.waker().wake_by_ref();
            return Poll::Ready(Ok(()));
        }
        ready!(this.poll_drain(cx))?;
        this.held = false;
        Pin::new(&mut this.inner).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        ready!(this.poll_drain(cx))?;
        Pin::new(&mut this.inner).poll_shutdown(cx)
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::Arc;
    use std::task::{Wake, Waker};

    use super::*;

    /// The I/O under the layer: records each write and flush, and can refuse the next write once.
    #[derive(Default)]
    struct Wire {
        writes: Vec<Vec<u8>>,
        flushes: usize,
        busy_once: bool,
    }

    impl AsyncWrite for Wire {
        fn poll_write(mut self: Pin<&mut Self>, cx: &mut Context<'_>, data: &[u8]) -> Poll<io::Result<usize>> {
            if std::mem::take(&mut self.busy_once) {
                cx.waker().wake_by_ref();
                return Poll::Pending;
            }
            self.writes.push(data.to_vec());
            Poll::Ready(Ok(data.len()))
        }
        fn poll_flush(mut self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<io::Result<()>> {
            self.flushes += 1;
            Poll::Ready(Ok(()))
        }
        fn poll_shutdown(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<io::Result<()>> {
            Poll::Ready(Ok(()))
        }
    }

    /// Counts wakeups, so a test can see the layer asked to be polled again.
    #[derive(Default)]
    struct Wakes(AtomicUsize);

    impl Wake for Wakes {
        fn wake(self: Arc<Self>) {
            self.0.fetch_add(1, Ordering::SeqCst);
        }
        fn wake_by_ref(self: &Arc<Self>) {
            self.0.fetch_add(1, Ordering::SeqCst);
        }
    }

    fn context() -> (Arc<Wakes>, Waker) {
        let wakes = Arc::new(Wakes::default());
        (wakes.clone(), Waker::from(wakes))
    }

    fn write(io: &mut Coalesce<Wire>, cx: &mut Context<'_>, data: &[u8]) -> Poll<io::Result<usize>> {
        Pin::new(io).poll_write(cx, data)
    }

    fn flush(io: &mut Coalesce<Wire>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(io).poll_flush(cx)
    }

    #[test]
    fn frames_written_in_one_turn_leave_in_one_write() {
        let (wakes, waker) = context();
        let mut cx = Context::from_waker(&waker);
        let mut io = Coalesce::new(Wire::default());
        // The pattern h2 produces: a frame, a flush, the next frame, a flush...
        for frame in [&b"one"[..], b"two", b"three"] {
            assert!(matches!(write(&mut io, &mut cx, frame), Poll::Ready(Ok(n)) if n == frame.len()));
            assert!(matches!(flush(&mut io, &mut cx), Poll::Ready(Ok(()))));
        }
        assert!(io.inner.writes.is_empty(), "held until the task comes back");
        assert!(wakes.0.load(Ordering::SeqCst) >= 1, "a held flush must ask for another poll");
        // The task comes back with nothing new to write: everything goes out, in order, at once.
        assert!(matches!(flush(&mut io, &mut cx), Poll::Ready(Ok(()))));
        assert_eq!(io.inner.writes, vec![b"onetwothree".to_vec()]);
        assert_eq!(io.inner.flushes, 1);
        // Nothing held: a flush goes straight through.
        assert!(matches!(flush(&mut io, &mut cx), Poll::Ready(Ok(()))));
        assert_eq!((io.inner.writes.len(), io.inner.flushes), (1, 2));
    }

    #[test]
    fn a_full_buffer_is_written_without_waiting_for_a_flush() {
        let (_, waker) = context();
        let mut cx = Context::from_waker(&waker);
        let mut io = Coalesce::new(Wire::default());
        let chunk = vec![7u8; LIMIT / 2 + 1];
        assert!(write(&mut io, &mut cx, &chunk).is_ready());
        assert!(io.inner.writes.is_empty());
        assert!(write(&mut io, &mut cx, &chunk).is_ready());
        assert_eq!(io.inner.writes, vec![chunk.clone()], "the first chunk goes out to make room");
        // A write larger than the buffer is not copied: it goes straight to the wire after what was held.
        let big = vec![9u8; LIMIT];
        assert!(matches!(write(&mut io, &mut cx, &big), Poll::Ready(Ok(n)) if n == LIMIT));
        assert_eq!(io.inner.writes, vec![chunk.clone(), chunk, big]);
    }

    #[test]
    fn a_busy_wire_keeps_the_bytes_and_their_order() {
        let (_, waker) = context();
        let mut cx = Context::from_waker(&waker);
        let mut io = Coalesce::new(Wire::default());
        assert!(write(&mut io, &mut cx, b"ab").is_ready());
        assert!(flush(&mut io, &mut cx).is_ready());
        io.inner.busy_once = true;
        assert!(flush(&mut io, &mut cx).is_pending(), "the wire is full: the flush waits");
        assert!(io.inner.writes.is_empty());
        assert!(matches!(flush(&mut io, &mut cx), Poll::Ready(Ok(()))));
        assert!(write(&mut io, &mut cx, b"c").is_ready());
        assert!(Pin::new(&mut io).poll_shutdown(&mut cx).is_ready(), "shutdown sends what is held");
        assert_eq!(io.inner.writes.concat(), b"abc".to_vec());
    }
}
