//! Write coalescing between HTTP and TLS: a flush is held back for one turn of the connection's task
//! so that the DATA frames h2 writes one at a time leave in large writes.
//!
//! h2 flushes after every DATA frame (hyperium/h2#902). Over TLS that is one 16 KiB record, one
//! syscall and one wakeup of the reader per frame: a 4 MiB list took about 270 of each, and that, not
//! building the list, was most of its time. Go's HTTP/2 server flushes only when it has nothing left
//! to write; this layer gets that behaviour without changing h2. Writes are encrypted into rustls's
//! buffer (the copy TLS makes anyway) without touching the socket. The first flush after new bytes
//! returns at once and wakes the task; the task comes back, writes whatever it had ready (which holds
//! the flush again), and once it flushes with nothing new written it has nothing more for now: the
//! records go out then, in one writev. The cost is one extra poll of the task. Bytes are never held
//! across a return to the runtime without that wakeup pending, so nothing waits on a timer, and a
//! full buffer (rustls's limit, [`LIMIT`]) goes out without waiting for a flush.

use std::io::{self, IoSlice, Write};
use std::pin::Pin;
use std::task::{ready, Context, Poll};

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpStream;
use tokio_rustls::server::TlsStream;

/// Bytes rustls may hold encrypted before they must be written: large enough that a list goes out in
/// a few dozen writes, small enough that a connection's buffer stays modest.
pub const LIMIT: usize = 256 * 1024;

/// An I/O object that can take bytes without writing them: its `poll_flush` writes what it took.
pub trait Stage {
    /// Take as much of `bufs` as fits; 0 when the buffer is full.
    fn stage(&mut self, bufs: &[IoSlice<'_>]) -> io::Result<usize>;
    /// Whether anything taken is still unwritten.
    fn has_staged(&self) -> bool;
}

impl Stage for TlsStream<TcpStream> {
    fn stage(&mut self, bufs: &[IoSlice<'_>]) -> io::Result<usize> {
        self.get_mut().1.writer().write_vectored(bufs)
    }

    fn has_staged(&self) -> bool {
        self.get_ref().1.wants_write()
    }
}

/// Cap what `conn`'s rustls session holds before it must be written; see [`LIMIT`].
pub fn limit_tls_buffer(conn: &mut TlsStream<TcpStream>) {
    conn.get_mut().1.set_buffer_limit(Some(LIMIT));
}

/// An I/O object whose flushes are held back for one turn of the task.
pub struct Coalesce<T> {
    inner: T,
    /// A flush was answered without writing, and the task was woken to flush again.
    held: bool,
}

impl<T> Coalesce<T> {
    /// Wrap `inner`.
    pub fn new(inner: T) -> Self {
        Coalesce { inner, held: false }
    }
}

impl<T: AsyncRead + Unpin> AsyncRead for Coalesce<T> {
    fn poll_read(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().inner).poll_read(cx, buf)
    }
}

impl<T: AsyncWrite + Stage + Unpin> AsyncWrite for Coalesce<T> {
    fn poll_write(self: Pin<&mut Self>, cx: &mut Context<'_>, data: &[u8]) -> Poll<io::Result<usize>> {
        self.poll_write_vectored(cx, &[IoSlice::new(data)])
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        if bufs.iter().all(|b| b.is_empty()) {
            return Poll::Ready(Ok(0));
        }
        let mut n = this.inner.stage(bufs)?;
        if n == 0 {
            // Full: write what is held, then there is room.
            ready!(Pin::new(&mut this.inner).poll_flush(cx))?;
            n = this.inner.stage(bufs)?;
            if n == 0 {
                return Poll::Ready(Err(io::ErrorKind::WriteZero.into()));
            }
        }
        this.held = false;
        Poll::Ready(Ok(n))
    }

    fn is_write_vectored(&self) -> bool {
        // h2 then chains frame payloads rather than copying them into its own buffer first.
        true
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        if this.inner.has_staged() && !this.held {
            this.held = true;
            cx.waker().wake_by_ref();
            return Poll::Ready(Ok(()));
        }
        this.held = false;
        Pin::new(&mut this.inner).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        ready!(Pin::new(&mut this.inner).poll_flush(cx))?;
        Pin::new(&mut this.inner).poll_shutdown(cx)
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::Arc;
    use std::task::{Wake, Waker};

    use super::*;

    /// The I/O under the layer: stages up to `cap` bytes, records each write and flush, and can be
    /// busy (socket full) once.
    struct Wire {
        cap: usize,
        staged: Vec<u8>,
        writes: Vec<Vec<u8>>,
        flushes: usize,
        busy_once: bool,
    }

    fn wire(cap: usize) -> Coalesce<Wire> {
        Coalesce::new(Wire { cap, staged: Vec::new(), writes: Vec::new(), flushes: 0, busy_once: false })
    }

    impl Stage for Wire {
        fn stage(&mut self, bufs: &[IoSlice<'_>]) -> io::Result<usize> {
            let before = self.staged.len();
            for b in bufs {
                let room = self.cap - self.staged.len();
                self.staged.extend_from_slice(&b[..b.len().min(room)]);
            }
            Ok(self.staged.len() - before)
        }
        fn has_staged(&self) -> bool {
            !self.staged.is_empty()
        }
    }

    impl AsyncWrite for Wire {
        fn poll_write(self: Pin<&mut Self>, _: &mut Context<'_>, _: &[u8]) -> Poll<io::Result<usize>> {
            unreachable!("the layer only stages")
        }
        fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
            if std::mem::take(&mut self.busy_once) {
                cx.waker().wake_by_ref();
                return Poll::Pending;
            }
            if !self.staged.is_empty() {
                let bytes = std::mem::take(&mut self.staged);
                self.writes.push(bytes);
            }
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
        let mut io = wire(LIMIT);
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
        let mut io = wire(10);
        assert!(matches!(write(&mut io, &mut cx, b"abcdefgh"), Poll::Ready(Ok(8))));
        assert!(matches!(write(&mut io, &mut cx, b"ijklmn"), Poll::Ready(Ok(2))), "a partial write");
        assert!(io.inner.writes.is_empty());
        assert!(matches!(write(&mut io, &mut cx, b"klmn"), Poll::Ready(Ok(4))));
        assert_eq!(io.inner.writes, vec![b"abcdefghij".to_vec()], "full: written out to make room");
    }

    #[test]
    fn a_busy_wire_keeps_the_bytes_and_their_order() {
        let (_, waker) = context();
        let mut cx = Context::from_waker(&waker);
        let mut io = wire(LIMIT);
        assert!(write(&mut io, &mut cx, b"ab").is_ready());
        assert!(flush(&mut io, &mut cx).is_ready());
        io.inner.busy_once = true;
        assert!(flush(&mut io, &mut cx).is_pending(), "the socket is full: the flush waits");
        assert!(io.inner.writes.is_empty());
        assert!(matches!(flush(&mut io, &mut cx), Poll::Ready(Ok(()))));
        assert!(write(&mut io, &mut cx, b"c").is_ready());
        assert!(Pin::new(&mut io).poll_shutdown(&mut cx).is_ready(), "shutdown sends what is held");
        assert_eq!(io.inner.writes.concat(), b"abc".to_vec());
    }
}
