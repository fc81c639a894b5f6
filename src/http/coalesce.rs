//! Write coalescing between HTTP and TLS: a flush is held back for one turn of the connection's task
//! so that the DATA frames h2 writes one at a time leave in large writes.
//!
//! h2 flushes after every DATA frame (hyperium/h2#902). Over TLS that is one 16 KiB record, one
//! syscall and one wakeup of the reader per frame: a 4 MiB list took about 270 of each (4.5 ms a list,
//! about 3.8 ms once they were gathered). Go's HTTP/2 server flushes only when it has nothing left
//! to write; this layer gets that behaviour without changing h2. Writes are encrypted into rustls's
//! buffer (the copy TLS makes anyway) without touching the socket. The first flush after new bytes
//! returns at once and wakes the task; the task comes back, writes whatever it had ready (which holds
//! the flush again), and once it flushes with nothing new written it has nothing more for now: the
//! records go out then, in one writev. The cost is one extra poll of the task. Bytes are never held
//! across a return to the runtime without that wakeup pending, so nothing waits on a timer; a full
//! buffer ([`LIMIT`] bytes or [`MAX_WRITES`] writes) goes out without waiting for a flush; and a
//! connection dropped with bytes held (the peer vanished mid-turn) sends what the socket takes.
//!
//! The layer also hands rustls whole records: a list's DATA frames left as a full record and a 9-byte
//! one each, and small writes (a watch event's frames) each as a record of their own. Whole records
//! took about 7% of kgate's CPU off a 4 MiB list, and fewer records are fewer for the reader to open.

use std::io::{self, IoSlice, Write};
use std::pin::Pin;
use std::task::{ready, Context, Poll};

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpStream;
use tokio_rustls::server::TlsStream;

/// Bytes the layer may hold before they must be written: large enough that a list goes out in a few
/// dozen writes, small enough that a connection's buffer stays modest.
pub const LIMIT: usize = 256 * 1024;
/// Writes held before they must be written, so that a stream of small events is not held for long
/// when the task never runs out of work; rustls also writes at most 64 records per writev.
pub const MAX_WRITES: u8 = 32;
/// The most plaintext one TLS record carries.
pub const RECORD: usize = 16 * 1024;
/// Room kept for the part of a record waiting for more bytes once it is sent.
const KEEP: usize = 1024;

/// An I/O object that can take bytes without writing them: its `poll_flush` writes what it took.
pub trait Stage {
    /// Take all of `bufs`, each call's bytes as whole records but for the last. The layer above
    /// bounds how much is taken before a flush.
    fn stage(&mut self, bufs: &[IoSlice<'_>]) -> io::Result<()>;
    /// Whether anything taken is still unwritten.
    fn has_staged(&self) -> bool;
    /// Write what the socket takes now, without waiting (the connection is going away).
    fn send_now(&mut self);
}

impl Stage for TlsStream<TcpStream> {
    fn stage(&mut self, bufs: &[IoSlice<'_>]) -> io::Result<()> {
        let want: usize = bufs.iter().map(|b| b.len()).sum();
        // Without a buffer limit (see `Coalesce::tls`) rustls takes everything it is given.
        match self.get_mut().1.writer().write_vectored(bufs)? {
            n if n == want => Ok(()),
            _ => Err(io::ErrorKind::WriteZero.into()),
        }
    }

    fn has_staged(&self) -> bool {
        self.get_ref().1.wants_write()
    }

    fn send_now(&mut self) {
        /// The socket as a `Write` that never blocks: `WouldBlock` ends the attempt.
        struct NonBlocking<'a>(&'a TcpStream);
        impl Write for NonBlocking<'_> {
            fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
                self.0.try_write(buf)
            }
            fn write_vectored(&mut self, bufs: &[IoSlice<'_>]) -> io::Result<usize> {
                self.0.try_write_vectored(bufs)
            }
            fn flush(&mut self) -> io::Result<()> {
                Ok(())
            }
        }
        let (tcp, conn) = self.get_mut();
        while conn.wants_write() {
            if !matches!(conn.write_tls(&mut NonBlocking(tcp)), Ok(n) if n > 0) {
                break;
            }
        }
    }
}

/// An I/O object whose flushes are held back for one turn of the task, and whose writes reach it
/// as whole TLS records.
pub struct Coalesce<T: Stage> {
    inner: T,
    /// A flush was answered without writing, and the task was woken to flush again.
    held: bool,
    /// Writes taken since `inner` last wrote everything out.
    writes: u8,
    /// Bytes given to `inner` since it last wrote everything out.
    staged: usize,
    /// Taken bytes short of a whole record, given to `inner` once more arrive or at the flush. rustls
    /// cuts each write into records on its own, so a DATA frame (a 9-byte head and a 16 KiB payload)
    /// would make a full record and a 9-byte one: twice the records, each with its own encryption,
    /// tag and, on the reader's side, its own decryption.
    tail: Vec<u8>,
}

impl<T: Stage> Coalesce<T> {
    /// Wrap `inner`.
    pub fn new(inner: T) -> Self {
        Coalesce { inner, held: false, writes: 0, staged: 0, tail: Vec::new() }
    }

    /// Take as much of `bufs` as the limit allows: whole records go to `inner`, the rest waits in
    /// `tail`. 0 when the limit is reached.
    fn take(&mut self, bufs: &[IoSlice<'_>]) -> io::Result<usize> {
        let room = LIMIT.saturating_sub(self.staged + self.tail.len());
        let take = bufs.iter().map(|b| b.len()).sum::<usize>().min(room);
        let whole = (self.tail.len() + take) / RECORD * RECORD;
        // `tail` is shorter than a record, so whole records reach into `bufs`.
        let into_records = whole.saturating_sub(self.tail.len());
        if whole > 0 {
            let mut slices = Vec::with_capacity(bufs.len() + 1);
            if !self.tail.is_empty() {
                slices.push(IoSlice::new(&self.tail));
            }
            slices.extend(span(bufs, 0, into_records).map(IoSlice::new));
            let staged = self.inner.stage(&slices);
            drop(slices);
            self.tail.clear();
            // A failed stage may have taken part of `tail`: nothing may send it twice.
            staged?;
            self.staged += whole;
        }
        for part in span(bufs, into_records, take) {
            self.tail.extend_from_slice(part);
        }
        Ok(take)
    }

    /// Whether anything taken is still unwritten.
    fn has_staged(&self) -> bool {
        !self.tail.is_empty() || self.inner.has_staged()
    }
}

/// Bytes `from..to` of `bufs` taken as one sequence, in the pieces they lie in.
fn span<'a>(bufs: &'a [IoSlice<'_>], from: usize, to: usize) -> impl Iterator<Item = &'a [u8]> {
    let mut at = 0;
    bufs.iter().filter_map(move |b| {
        let (start, end) = (at, at + b.len());
        at = end;
        let (lo, hi) = (from.max(start), to.min(end));
        (lo < hi).then(|| &b[lo - start..hi - start])
    })
}

impl Coalesce<TlsStream<TcpStream>> {
    /// Wrap a server's TLS connection; the layer, not rustls, bounds what is held.
    pub fn tls(mut conn: TlsStream<TcpStream>) -> Self {
        conn.get_mut().1.set_buffer_limit(None);
        Self::new(conn)
    }
}

impl<T: Stage + AsyncWrite + Unpin> Coalesce<T> {
    /// Write everything held, for real.
    fn poll_send(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        if !self.tail.is_empty() {
            let staged = self.inner.stage(&[IoSlice::new(&self.tail)]);
            self.staged += self.tail.len();
            self.tail.clear();
            if self.tail.capacity() > KEEP {
                // One large HTTP/1.1 write can leave most of a record here; a connection that goes on
                // to watch should not keep that room for its lifetime.
                self.tail = Vec::new();
            }
            staged?;
        }
        ready!(Pin::new(&mut self.inner).poll_flush(cx))?;
        self.held = false;
        self.writes = 0;
        self.staged = 0;
        Poll::Ready(Ok(()))
    }
}

impl<T: Stage> Drop for Coalesce<T> {
    fn drop(&mut self) {
        // hyper drops a connection without a last flush when the peer's EOF arrives in the turn after a
        // held flush; those bytes would have been on the wire already without this layer.
        if !self.tail.is_empty() && self.inner.stage(&[IoSlice::new(&self.tail)]).is_err() {
            return;
        }
        if self.inner.has_staged() {
            self.inner.send_now();
        }
    }
}

impl<T: Stage + AsyncRead + Unpin> AsyncRead for Coalesce<T> {
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
        if this.writes >= MAX_WRITES {
            ready!(this.poll_send(cx))?;
        }
        let mut n = this.take(bufs)?;
        if n == 0 {
            // Full: write what is held, then there is room.
            ready!(this.poll_send(cx))?;
            n = this.take(bufs)?;
            if n == 0 {
                return Poll::Ready(Err(io::ErrorKind::WriteZero.into()));
            }
        }
        this.held = false;
        this.writes += 1;
        Poll::Ready(Ok(n))
    }

    fn is_write_vectored(&self) -> bool {
        // h2 then chains frame payloads rather than copying them into its own buffer first.
        true
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        if this.has_staged() && !this.held {
            this.held = true;
            cx.waker().wake_by_ref();
            return Poll::Ready(Ok(()));
        }
        this.poll_send(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        ready!(this.poll_send(cx))?;
        Pin::new(&mut this.inner).poll_shutdown(cx)
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::{Arc, Mutex};
    use std::task::{Wake, Waker};

    use super::*;

    /// The I/O under the layer: records each call's bytes, each write and flush, and can be busy
    /// (socket full) once.
    struct Wire {
        staged: Vec<u8>,
        /// How many bytes each `stage` call carried.
        calls: Vec<usize>,
        writes: Vec<Vec<u8>>,
        flushes: usize,
        busy_once: bool,
        /// What `send_now` wrote, readable after the layer is dropped.
        sent_now: Arc<Mutex<Vec<u8>>>,
    }

    fn wire() -> Coalesce<Wire> {
        let (staged, calls, writes, sent_now) = (Vec::new(), Vec::new(), Vec::new(), Arc::default());
        Coalesce::new(Wire { staged, calls, writes, flushes: 0, busy_once: false, sent_now })
    }

    impl Stage for Wire {
        fn stage(&mut self, bufs: &[IoSlice<'_>]) -> io::Result<()> {
            let before = self.staged.len();
            for b in bufs {
                self.staged.extend_from_slice(b);
            }
            self.calls.push(self.staged.len() - before);
            Ok(())
        }
        fn has_staged(&self) -> bool {
            !self.staged.is_empty()
        }
        fn send_now(&mut self) {
            self.sent_now.lock().unwrap().append(&mut self.staged);
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
        let mut io = wire();
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
        let mut io = wire();
        let big = vec![7u8; LIMIT - 2];
        assert!(matches!(write(&mut io, &mut cx, &big), Poll::Ready(Ok(n)) if n == big.len()));
        assert!(matches!(write(&mut io, &mut cx, b"abcd"), Poll::Ready(Ok(2))), "a partial write");
        assert!(io.inner.writes.is_empty());
        assert!(matches!(write(&mut io, &mut cx, b"cd"), Poll::Ready(Ok(2))));
        assert_eq!(io.inner.writes.len(), 1, "full: written out to make room");
        assert_eq!(io.inner.writes[0].len(), LIMIT);
        assert!(io.inner.writes[0].ends_with(b"ab"));
        assert!(flush(&mut io, &mut cx).is_ready());
        assert!(flush(&mut io, &mut cx).is_ready());
        assert_eq!(io.inner.writes.concat(), [&big[..], b"abcd"].concat());
        let (last, whole) = io.inner.calls.split_last().unwrap();
        assert!(whole.iter().all(|&n| n % RECORD == 0) && *last == 2, "stage calls: {:?}", io.inner.calls);
    }

    #[test]
    fn a_busy_wire_when_full_takes_nothing_until_it_drains() {
        let (_, waker) = context();
        let mut cx = Context::from_waker(&waker);
        let mut io = wire();
        let mut sent = Vec::new();
        for i in 0..MAX_WRITES {
            assert!(write(&mut io, &mut cx, &[i]).is_ready());
            assert!(flush(&mut io, &mut cx).is_ready());
            sent.push(i);
        }
        io.inner.busy_once = true;
        assert!(write(&mut io, &mut cx, b"next").is_pending(), "the held writes must go first, and cannot yet");
        assert!(matches!(write(&mut io, &mut cx, b"next"), Poll::Ready(Ok(4))));
        sent.extend_from_slice(b"next");
        assert!(flush(&mut io, &mut cx).is_ready());
        assert!(flush(&mut io, &mut cx).is_ready());
        assert_eq!(io.inner.writes.concat(), sent, "every byte once, in order");
    }

    #[test]
    fn frames_reach_tls_as_whole_records() {
        let (_, waker) = context();
        let mut cx = Context::from_waker(&waker);
        let mut io = wire();
        // What h2 writes for a list: a 9-byte frame head and a full frame's payload, each time.
        let mut sent = Vec::new();
        for i in 0..5u8 {
            let (head, payload) = ([i; 9], vec![i; RECORD]);
            let bufs = [IoSlice::new(&head), IoSlice::new(&payload)];
            assert!(
                matches!(Pin::new(&mut io).poll_write_vectored(&mut cx, &bufs), Poll::Ready(Ok(n)) if n == 9 + RECORD)
            );
            sent.extend_from_slice(&head);
            sent.extend_from_slice(&payload);
        }
        assert!(
            io.inner.calls.iter().all(|&n| n % RECORD == 0),
            "only whole records before the flush: {:?}",
            io.inner.calls
        );
        assert!(flush(&mut io, &mut cx).is_ready());
        assert!(flush(&mut io, &mut cx).is_ready());
        assert_eq!(io.inner.calls.last(), Some(&(5 * 9)), "the short record comes last, once");
        assert_eq!(io.inner.writes.concat(), sent, "every byte, in order");
    }

    #[test]
    fn a_busy_wire_keeps_the_bytes_and_their_order() {
        let (_, waker) = context();
        let mut cx = Context::from_waker(&waker);
        let mut io = wire();
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

    #[test]
    fn many_small_writes_go_out_without_waiting_for_a_quiet_turn() {
        let (_, waker) = context();
        let mut cx = Context::from_waker(&waker);
        let mut io = wire();
        for _ in 0..MAX_WRITES {
            assert!(write(&mut io, &mut cx, b"e").is_ready());
            assert!(flush(&mut io, &mut cx).is_ready());
        }
        assert!(io.inner.writes.is_empty());
        assert!(write(&mut io, &mut cx, b"f").is_ready());
        assert_eq!(io.inner.writes, vec![vec![b'e'; MAX_WRITES as usize]]);
    }

    #[test]
    fn a_dropped_connection_sends_what_it_held() {
        let (_, waker) = context();
        let mut cx = Context::from_waker(&waker);
        let mut io = wire();
        let sent = io.inner.sent_now.clone();
        assert!(write(&mut io, &mut cx, b"last event").is_ready());
        assert!(flush(&mut io, &mut cx).is_ready());
        drop(io);
        assert_eq!(*sent.lock().unwrap(), b"last event".to_vec());
    }

    /// A server TLS connection behind the layer, and its peer.
    async fn tls_pair() -> (Coalesce<TlsStream<TcpStream>>, tokio_rustls::client::TlsStream<TcpStream>) {
        let (server, peer) = crate::http::server::tests::pair(None).await;
        (Coalesce::tls(server), peer)
    }

    /// The same over a real TLS connection: what a dropped connection held reaches the peer.
    #[tokio::test]
    async fn a_dropped_tls_connection_sends_what_it_held() {
        use tokio::io::AsyncReadExt;
        let (mut io, mut peer) = tls_pair().await;
        let (wakes, waker) = context();
        let mut cx = Context::from_waker(&waker);
        assert!(Pin::new(&mut io).poll_write(&mut cx, b"last event").is_ready());
        assert!(Pin::new(&mut io).poll_flush(&mut cx).is_ready());
        assert_eq!(wakes.0.load(Ordering::SeqCst), 1, "held, not written");
        drop(io);
        let mut got = vec![0u8; 10];
        tokio::time::timeout(std::time::Duration::from_secs(5), peer.read_exact(&mut got)).await.unwrap().unwrap();
        assert_eq!(got, b"last event");
    }

    /// A list's worth of frames, past what rustls holds by default, reaches the peer whole.
    #[tokio::test]
    async fn a_large_answer_crosses_real_tls_intact() {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let (mut io, mut peer) = tls_pair().await;
        let sent: Vec<u8> = (0..3 * LIMIT + 12345).map(|i| (i % 251) as u8).collect();
        let expected = sent.clone();
        let reader = tokio::spawn(async move {
            let mut got = vec![0u8; expected.len()];
            peer.read_exact(&mut got).await.unwrap();
            assert!(got == expected, "the peer read other bytes than were written");
        });
        // In frame-sized writes with a flush after each, as h2 writes; then a last, quiet flush.
        for frame in sent.chunks(RECORD + 9) {
            io.write_all(frame).await.unwrap();
            io.flush().await.unwrap();
        }
        io.flush().await.unwrap();
        tokio::time::timeout(std::time::Duration::from_secs(10), reader).await.unwrap().unwrap();
    }
}
