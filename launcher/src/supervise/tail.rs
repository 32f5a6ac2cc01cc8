//! Watching a stream with bounded memory: the last bytes of it (for classification and
//! reports). Whether a denial signature appeared anywhere in it is the policy's
//! `DenialScanner`.

/// The last `cap` bytes written.
///
/// The bytes are the end of a buffer with room for `cap + slack(cap)`: a push appends,
/// and only when the room runs out are the newest bytes moved to the front, once per at
/// least `slack` bytes pushed. Dropping the oldest bytes on every push instead moved the
/// whole tail for every read (a few KiB from a pipe): O(cap) per read, so capturing 1 GiB
/// with `--max-output 10000000` took 7.8 s (1.0 s with this buffer), and with the default
/// 64000 it was half of the launcher's user time.
#[derive(Debug)]
pub struct Tail {
    cap: usize,
    buf: Vec<u8>,
}

/// Extra room beyond `cap`: each compaction moves at most `cap` bytes after at least
/// `slack` new ones arrived. Bounded so a large `--max-output` does not double memory.
fn slack(cap: usize) -> usize {
    cap.clamp(256 * 1024, 4 * 1024 * 1024)
}

impl Tail {
    pub fn new(cap: usize) -> Tail {
        Tail {
            cap,
            buf: Vec::new(),
        }
    }

    pub fn push(&mut self, chunk: &[u8]) {
        if chunk.len() >= self.cap {
            self.buf.clear();
            self.buf.extend_from_slice(&chunk[chunk.len() - self.cap..]);
            return;
        }
        let room = self.cap.saturating_add(slack(self.cap));
        if self.buf.len() + chunk.len() > room {
            // Keep just what, with this chunk, makes up the tail.
            let keep = self.cap - chunk.len();
            self.buf.drain(..self.buf.len().saturating_sub(keep));
        }
        let needed = self.buf.len() + chunk.len();
        if needed > self.buf.capacity() {
            // Grow by doubling, as a Vec would, but never past the room: memory follows
            // what the stream has used.
            let target = needed.max(self.buf.capacity().saturating_mul(2)).min(room);
            self.buf.reserve_exact(target - self.buf.len());
        }
        self.buf.extend_from_slice(chunk);
    }

    pub fn bytes(&self) -> &[u8] {
        &self.buf[self.buf.len().saturating_sub(self.cap)..]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tail_keeps_the_last_bytes() {
        let mut t = Tail::new(4);
        t.push(b"ab");
        assert_eq!(t.bytes(), b"ab");
        t.push(b"cde");
        assert_eq!(t.bytes(), b"bcde");
        t.push(b"0123456");
        assert_eq!(t.bytes(), b"3456");
        t.push(b"");
        assert_eq!(t.bytes(), b"3456");
        t.push(b"7890");
        assert_eq!(t.bytes(), b"7890");
        let mut t = Tail::new(0);
        t.push(b"abc");
        assert_eq!(t.bytes(), b"");
        assert_eq!(Tail::new(9).bytes(), b"");
    }

    /// After every push the tail is the last `cap` bytes of everything pushed, for chunk
    /// sizes around the cap and around the room (where it compacts), and the buffer
    /// never holds more than its room.
    #[test]
    fn tail_matches_the_stream_across_compactions() {
        for cap in [1, 7, 4096, 64_000, 300_000, 5 * 1024 * 1024] {
            let room = cap + slack(cap);
            let sizes = [
                1,
                3,
                cap - 1,
                cap,
                cap + 1,
                room / 3,
                room - cap,
                4096,
                65536,
            ];
            let mut t = Tail::new(cap);
            let mut all: Vec<u8> = Vec::new();
            let mut next = 0u8;
            for round in 0..40 {
                let n = sizes[round % sizes.len()].max(1);
                let chunk: Vec<u8> = (0..n)
                    .map(|_| {
                        next = next.wrapping_add(1);
                        next
                    })
                    .collect();
                t.push(&chunk);
                all.extend_from_slice(&chunk);
                assert_eq!(t.bytes(), &all[all.len().saturating_sub(cap)..]);
                assert!(t.buf.capacity() <= room, "holds more than its room");
            }
        }
    }
}
