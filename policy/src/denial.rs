//! Finding denial signatures in a stream, with the harness's answer on the whole of it.
//!
//! The harness lower-cases the whole of stderr (JavaScript's `toLowerCase`, full Unicode)
//! and looks for each signature as a substring. A stream arrives in chunks of bytes, so
//! the scanner fixes what that means chunk by chunk:
//! - bytes are decoded as `String::from_utf8_lossy` decodes the whole stream: a sequence
//!   cut by a chunk boundary is completed by the next chunk, and each invalid sequence
//!   becomes one U+FFFD, whatever the chunking;
//! - every character is lower-cased on its own (`char::to_lowercase`, which may give
//!   more than one character, as `İ` does), exactly what `str::to_lowercase` does except
//!   for capital sigma, whose word-final form (`ς`, else `σ`) depends on the letters
//!   around it, which a stream may not have seen yet. Both forms are folded to `σ` in the
//!   text and in the signatures: for a signature without a sigma the answer is exactly
//!   the whole-text answer (no such signature can match either form); a signature with a
//!   sigma matches either form. stockade's own signatures are ASCII.
//! - a signature is compared as given (the harness does not lower-case them), so one
//!   with capitals never matches, and an empty one always does.
//!
//! Memory is bounded by the longest signature, whatever the stream's length.

/// Capital sigma's two lower-case forms, folded into one.
const FINAL_SIGMA: char = 'ς';
const SIGMA: char = 'σ';

/// The chunk size [`DenialScanner::found_in`] scans a whole text in.
const WHOLE_TEXT_CHUNK: usize = 64 * 1024;

/// Looks for signatures anywhere in a stream pushed in chunks.
#[derive(Debug, Clone)]
pub struct DenialScanner {
    /// The signatures' UTF-8 bytes, sigma folded.
    signatures: Vec<Vec<u8>>,
    /// The start of a character cut by the end of the last chunk (at most 3 bytes).
    undecoded: Vec<u8>,
    /// The last lower-cased bytes: a signature may start in them.
    carry: Vec<u8>,
    keep: usize,
    found: bool,
}

fn fold(c: char, out: &mut String) {
    for l in c.to_lowercase() {
        out.push(if l == FINAL_SIGMA { SIGMA } else { l });
    }
}

impl DenialScanner {
    pub fn new(signatures: &[String]) -> DenialScanner {
        let signatures: Vec<Vec<u8>> = signatures
            .iter()
            .map(|s| s.replace(FINAL_SIGMA, &SIGMA.to_string()).into_bytes())
            .collect();
        let keep = signatures
            .iter()
            .map(|s| s.len().saturating_sub(1))
            .max()
            .unwrap_or(0);
        let found = signatures.iter().any(Vec::is_empty);
        DenialScanner {
            signatures,
            undecoded: Vec::new(),
            carry: Vec::new(),
            keep,
            found,
        }
    }

    /// Scans the next chunk of the stream.
    pub fn push(&mut self, chunk: &[u8]) {
        if self.found || self.signatures.is_empty() {
            return;
        }
        let mut bytes = std::mem::take(&mut self.undecoded);
        bytes.extend_from_slice(chunk);
        let mut lowered = String::new();
        let mut rest = bytes.as_slice();
        while !rest.is_empty() {
            match std::str::from_utf8(rest) {
                Ok(text) => {
                    text.chars().for_each(|c| fold(c, &mut lowered));
                    rest = &[];
                }
                Err(e) => {
                    let (valid, after) = rest.split_at(e.valid_up_to());
                    if let Ok(text) = std::str::from_utf8(valid) {
                        text.chars().for_each(|c| fold(c, &mut lowered));
                    }
                    match e.error_len() {
                        Some(n) => {
                            lowered.push(char::REPLACEMENT_CHARACTER);
                            rest = &after[n..];
                        }
                        // Cut by the chunk's end: the next chunk completes it.
                        None => {
                            self.undecoded = after.to_vec();
                            rest = &[];
                        }
                    }
                }
            }
        }
        self.scan(lowered.as_bytes());
    }

    /// The stream ended: a character left incomplete is one U+FFFD, as in the whole text.
    pub fn end(&mut self) {
        if !self.undecoded.is_empty() {
            self.undecoded.clear();
            let mut replacement = [0u8; 4];
            let r = char::REPLACEMENT_CHARACTER.encode_utf8(&mut replacement);
            self.scan(r.as_bytes());
        }
    }

    fn scan(&mut self, lowered: &[u8]) {
        if self.found || lowered.is_empty() {
            return;
        }
        let mut window = std::mem::take(&mut self.carry);
        window.extend_from_slice(lowered);
        // Byte comparison is substring search here: both sides are valid UTF-8, and a
        // signature starts with a leading byte, so it can only match at a character.
        self.found = self
            .signatures
            .iter()
            .any(|sig| window.windows(sig.len()).any(|w| w == sig.as_slice()));
        let start = window.len().saturating_sub(self.keep);
        self.carry = window.split_off(start);
    }

    /// Whether any signature appeared so far.
    pub fn found(&self) -> bool {
        self.found
    }

    /// The answer on a whole text, scanned in chunks as a stream would be: the
    /// lower-cased copy and the search window then stay the size of a chunk, not of the
    /// text (the command's stderr, up to the 64 MiB `classify` accepts).
    pub fn found_in(signatures: &[String], text: &str) -> bool {
        let mut s = DenialScanner::new(signatures);
        for chunk in text.as_bytes().chunks(WHOLE_TEXT_CHUNK) {
            s.push(chunk);
            if s.found() {
                break;
            }
        }
        s.end();
        s.found()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The harness's rule, written as it states it.
    fn harness(signatures: &[String], text: &str) -> bool {
        let lower = text.to_lowercase();
        signatures.iter().any(|s| lower.contains(s.as_str()))
    }

    fn sigs(s: &[&str]) -> Vec<String> {
        s.iter().map(|s| s.to_string()).collect()
    }

    /// A small deterministic generator, so the cases are the same on every run.
    struct Lcg(u64);
    impl Lcg {
        fn next(&mut self, n: usize) -> usize {
            self.0 = self
                .0
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            ((self.0 >> 33) as usize) % n
        }
    }

    #[test]
    fn any_chunking_gives_the_whole_text_answer() {
        let signatures = sigs(&[
            "permission denied",
            "operation not permitted",
            "read-only file system",
            "i\u{307}x",
            "é",
            "\u{fffd}",
        ]);
        let pieces: [&[u8]; 16] = [
            b"Permission ",
            b"DENIED",
            "İX".as_bytes(),
            "É".as_bytes(),
            "ΣΑΣ ".as_bytes(),
            b"\xff",
            b"\xe2\x82",
            b"\xac",
            b"operation not ",
            b"PERMITTED\n",
            b"read-only",
            b" File System",
            b"x",
            b" ",
            b"\xf0\x9f",
            "ẞ".as_bytes(),
        ];
        let mut rng = Lcg(7);
        for case in 0..3000 {
            let mut stream = Vec::new();
            for _ in 0..rng.next(8) {
                stream.extend_from_slice(pieces[rng.next(pieces.len())]);
            }
            let whole = String::from_utf8_lossy(&stream).into_owned();
            for sig in &signatures {
                let one = vec![sig.clone()];
                let expected = harness(&one, &whole);
                assert_eq!(
                    DenialScanner::found_in(&one, &whole),
                    expected,
                    "{case}: {whole:?}"
                );
                // Pushed in random chunks of bytes (characters cut anywhere).
                let mut s = DenialScanner::new(&one);
                let mut at = 0;
                while at < stream.len() {
                    let n = 1 + rng.next(stream.len() - at);
                    s.push(&stream[at..at + n]);
                    at += n;
                }
                s.end();
                assert_eq!(s.found(), expected, "{case}: {sig:?} in {whole:?}");
            }
        }
    }

    #[test]
    fn signatures_are_taken_as_given() {
        assert!(!DenialScanner::found_in(&sigs(&["Denied"]), "Denied"));
        assert!(DenialScanner::found_in(&sigs(&[""]), ""));
        assert!(!DenialScanner::found_in(&[], "permission denied"));
        // Either sigma form matches a sigma signature.
        assert!(DenialScanner::found_in(&sigs(&["σ"]), "ΟΔΟΣ"));
        assert!(DenialScanner::found_in(&sigs(&["ς"]), "ΣΑ"));
    }
}
