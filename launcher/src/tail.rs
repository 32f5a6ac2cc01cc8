//! Watching a stream with bounded memory: the last bytes of it (for classification and
//! reports), and whether any signature appeared anywhere in it.

/// The last `cap` bytes written.
#[derive(Debug)]
pub struct Tail {
    cap: usize,
    buf: Vec<u8>,
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
        let overflow = (self.buf.len() + chunk.len()).saturating_sub(self.cap);
        self.buf.drain(..overflow);
        self.buf.extend_from_slice(chunk);
    }

    pub fn bytes(&self) -> &[u8] {
        &self.buf
    }
}

/// Finds lower-case ASCII signatures anywhere in a stream, case-insensitively, even when
/// a signature is split across chunks.
#[derive(Debug)]
pub struct SignatureScanner {
    signatures: Vec<Vec<u8>>,
    carry: Vec<u8>,
    keep: usize,
    found: bool,
}

impl SignatureScanner {
    pub fn new(signatures: &[String]) -> SignatureScanner {
        let signatures: Vec<Vec<u8>> = signatures
            .iter()
            .map(|s| s.to_ascii_lowercase().into_bytes())
            .collect();
        let keep = signatures
            .iter()
            .map(|s| s.len().saturating_sub(1))
            .max()
            .unwrap_or(0);
        SignatureScanner {
            signatures,
            carry: Vec::new(),
            keep,
            found: false,
        }
    }

    pub fn push(&mut self, chunk: &[u8]) {
        if self.found || self.signatures.is_empty() {
            return;
        }
        let mut window = std::mem::take(&mut self.carry);
        window.extend(chunk.iter().map(u8::to_ascii_lowercase));
        self.found = self.signatures.iter().any(|sig| {
            window
                .windows(sig.len().max(1))
                .any(|w| w == sig.as_slice())
        });
        let start = window.len().saturating_sub(self.keep);
        self.carry = window.split_off(start);
    }

    pub fn found(&self) -> bool {
        self.found
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
    }

    #[test]
    fn scanner_finds_signatures_split_across_chunks_in_any_case() {
        let sigs = vec!["permission denied".to_string()];
        let mut s = SignatureScanner::new(&sigs);
        s.push(b"bash: /x: Permiss");
        assert!(!s.found());
        s.push(b"ion DENIED\n");
        assert!(s.found());
        let mut s = SignatureScanner::new(&sigs);
        for b in b"xx PERMISSION denied" {
            s.push(&[*b]);
        }
        assert!(s.found());
        let mut s = SignatureScanner::new(&sigs);
        s.push(b"permission granted");
        assert!(!s.found());
    }
}
