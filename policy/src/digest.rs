//! SHA-256 (FIPS 180-4), which ties a request file to the ConfinedArgv that names it:
//! `confine` puts the digest of the bytes it wrote in the argv (`--sha256 HEX`), and the
//! runner refuses, and leaves untouched, a file whose bytes do not have that digest.
//!
//! [`Sha256`] hashes a stream piece by piece: the receipts of `stockade run` digest the
//! complete output as it passes through, and the runner an executable as it reads it.
//!
//! Written here rather than taken from a crate: it is a page of code with published test
//! vectors, and the runner (on the path of every command) stays free of dependencies.

const K: [u32; 64] = [
    0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4, 0xab1c5ed5,
    0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174,
    0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da,
    0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7, 0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967,
    0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85,
    0xa2bfe8a1, 0xa81a664b, 0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070,
    0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
    0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7, 0xc67178f2,
];

const H0: [u32; 8] = [
    0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a, 0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19,
];

/// Inputs shorter than this are hashed in portable code without asking the CPU what it
/// has: the first question costs about ten `cpuid` instructions, each a trap to the
/// hypervisor in a virtual machine (~0.08 ms measured in the runner on one), while a
/// request of a few KiB takes microseconds in portable code.
const SHA_NI_FROM: usize = 16 * 1024;

/// Compresses whole 64-byte blocks (`blocks.len()` a multiple of 64): with the CPU's SHA
/// instructions where it has them (x86_64 SHA-NI) and the input is long, else in
/// portable code. The receipts of `stockade run` hash every byte of the command's output
/// on the launcher's path, so the difference (several times the throughput) is the
/// command's.
fn compress_blocks(state: &mut [u32; 8], blocks: &[u8]) {
    #[cfg(target_arch = "x86_64")]
    if blocks.len() >= SHA_NI_FROM
        && std::arch::is_x86_feature_detected!("sha")
        && std::arch::is_x86_feature_detected!("sse4.1")
        && std::arch::is_x86_feature_detected!("ssse3")
    {
        // SAFETY: the CPU was just found to have every feature the function enables.
        unsafe { shani::compress_blocks(state, blocks) };
        return;
    }
    for block in blocks.chunks_exact(64) {
        compress(state, block);
    }
}

/// SHA-256 with the x86 SHA extensions: the instruction sequence of Intel's published
/// description of them (two rounds per `sha256rnds2`, the message schedule by
/// `sha256msg1`/`sha256msg2`), checked against the portable code in the tests.
#[cfg(target_arch = "x86_64")]
mod shani {
    use std::arch::x86_64::*;

    /// The next four message words from the previous sixteen.
    #[target_feature(enable = "sha,sse2,ssse3,sse4.1")]
    fn schedule(v0: __m128i, v1: __m128i, v2: __m128i, v3: __m128i) -> __m128i {
        let t1 = _mm_sha256msg1_epu32(v0, v1);
        let t2 = _mm_alignr_epi8(v3, v2, 4);
        let t3 = _mm_add_epi32(t1, t2);
        _mm_sha256msg2_epu32(t3, v3)
    }

    /// Four rounds with message words `w` and round constants `K[4i..4i+4]`.
    #[target_feature(enable = "sha,sse2,ssse3,sse4.1")]
    fn rounds4(abef: &mut __m128i, cdgh: &mut __m128i, w: __m128i, i: usize) {
        let k = &super::K[4 * i..4 * i + 4];
        let k = _mm_set_epi32(k[3] as i32, k[2] as i32, k[1] as i32, k[0] as i32);
        let t1 = _mm_add_epi32(w, k);
        *cdgh = _mm_sha256rnds2_epu32(*cdgh, *abef, t1);
        let t2 = _mm_shuffle_epi32(t1, 0x0E);
        *abef = _mm_sha256rnds2_epu32(*abef, *cdgh, t2);
    }

    #[target_feature(enable = "sha,sse2,ssse3,sse4.1")]
    pub fn compress_blocks(state: &mut [u32; 8], blocks: &[u8]) {
        // Big-endian words: reverse the bytes of each.
        let mask = _mm_set_epi64x(
            0x0C0D_0E0F_0809_0A0Bu64 as i64,
            0x0405_0607_0001_0203u64 as i64,
        );
        let load = |bytes: &[u8]| -> __m128i {
            let bytes: &[u8; 16] = bytes.try_into().unwrap_or(&[0; 16]);
            // SAFETY: an unaligned load of 16 bytes from a 16-byte array.
            unsafe { _mm_loadu_si128(bytes.as_ptr().cast()) }
        };
        let words = |w: &[u32]| -> __m128i {
            _mm_set_epi32(w[3] as i32, w[2] as i32, w[1] as i32, w[0] as i32)
        };
        let dcba = words(&state[0..4]);
        let efgh = words(&state[4..8]);
        let cdab = _mm_shuffle_epi32(dcba, 0xB1);
        let efgh = _mm_shuffle_epi32(efgh, 0x1B);
        let mut abef = _mm_alignr_epi8(cdab, efgh, 8);
        let mut cdgh = _mm_blend_epi16(efgh, cdab, 0xF0);
        for block in blocks.chunks_exact(64) {
            let (abef_saved, cdgh_saved) = (abef, cdgh);
            let mut w0 = _mm_shuffle_epi8(load(&block[0..16]), mask);
            let mut w1 = _mm_shuffle_epi8(load(&block[16..32]), mask);
            let mut w2 = _mm_shuffle_epi8(load(&block[32..48]), mask);
            let mut w3 = _mm_shuffle_epi8(load(&block[48..64]), mask);
            let mut w4;
            rounds4(&mut abef, &mut cdgh, w0, 0);
            rounds4(&mut abef, &mut cdgh, w1, 1);
            rounds4(&mut abef, &mut cdgh, w2, 2);
            rounds4(&mut abef, &mut cdgh, w3, 3);
            // Rounds 16..64: each four from the next four message words, the five
            // registers taking turns.
            w4 = schedule(w0, w1, w2, w3);
            rounds4(&mut abef, &mut cdgh, w4, 4);
            w0 = schedule(w1, w2, w3, w4);
            rounds4(&mut abef, &mut cdgh, w0, 5);
            w1 = schedule(w2, w3, w4, w0);
            rounds4(&mut abef, &mut cdgh, w1, 6);
            w2 = schedule(w3, w4, w0, w1);
            rounds4(&mut abef, &mut cdgh, w2, 7);
            w3 = schedule(w4, w0, w1, w2);
            rounds4(&mut abef, &mut cdgh, w3, 8);
            w4 = schedule(w0, w1, w2, w3);
            rounds4(&mut abef, &mut cdgh, w4, 9);
            w0 = schedule(w1, w2, w3, w4);
            rounds4(&mut abef, &mut cdgh, w0, 10);
            w1 = schedule(w2, w3, w4, w0);
            rounds4(&mut abef, &mut cdgh, w1, 11);
            w2 = schedule(w3, w4, w0, w1);
            rounds4(&mut abef, &mut cdgh, w2, 12);
            w3 = schedule(w4, w0, w1, w2);
            rounds4(&mut abef, &mut cdgh, w3, 13);
            w4 = schedule(w0, w1, w2, w3);
            rounds4(&mut abef, &mut cdgh, w4, 14);
            w0 = schedule(w1, w2, w3, w4);
            rounds4(&mut abef, &mut cdgh, w0, 15);
            abef = _mm_add_epi32(abef, abef_saved);
            cdgh = _mm_add_epi32(cdgh, cdgh_saved);
        }
        let feba = _mm_shuffle_epi32(abef, 0x1B);
        let dchg = _mm_shuffle_epi32(cdgh, 0xB1);
        let dcba = _mm_blend_epi16(feba, dchg, 0xF0);
        let hgef = _mm_alignr_epi8(dchg, feba, 8);
        let mut out = [0u32; 8];
        // SAFETY: unaligned stores of 16 bytes each into the two halves of `out`.
        unsafe {
            _mm_storeu_si128(out.as_mut_ptr().cast(), dcba);
            _mm_storeu_si128(out.as_mut_ptr().add(4).cast(), hgef);
        }
        *state = out;
    }
}

fn compress(state: &mut [u32; 8], block: &[u8]) {
    let mut w = [0u32; 64];
    for (i, word) in block.chunks_exact(4).enumerate() {
        w[i] = u32::from_be_bytes([word[0], word[1], word[2], word[3]]);
    }
    for i in 16..64 {
        let s0 = w[i - 15].rotate_right(7) ^ w[i - 15].rotate_right(18) ^ (w[i - 15] >> 3);
        let s1 = w[i - 2].rotate_right(17) ^ w[i - 2].rotate_right(19) ^ (w[i - 2] >> 10);
        w[i] = w[i - 16]
            .wrapping_add(s0)
            .wrapping_add(w[i - 7])
            .wrapping_add(s1);
    }
    let [mut a, mut b, mut c, mut d, mut e, mut f, mut g, mut h] = *state;
    for i in 0..64 {
        let s1 = e.rotate_right(6) ^ e.rotate_right(11) ^ e.rotate_right(25);
        let ch = (e & f) ^ (!e & g);
        let t1 = h
            .wrapping_add(s1)
            .wrapping_add(ch)
            .wrapping_add(K[i])
            .wrapping_add(w[i]);
        let s0 = a.rotate_right(2) ^ a.rotate_right(13) ^ a.rotate_right(22);
        let maj = (a & b) ^ (a & c) ^ (b & c);
        let t2 = s0.wrapping_add(maj);
        h = g;
        g = f;
        f = e;
        e = d.wrapping_add(t1);
        d = c;
        c = b;
        b = a;
        a = t1.wrapping_add(t2);
    }
    for (s, v) in state.iter_mut().zip([a, b, c, d, e, f, g, h]) {
        *s = s.wrapping_add(v);
    }
}

/// A SHA-256 computed over data that arrives in pieces: a stream is hashed as it passes
/// through, with no more memory than one block.
#[derive(Clone, Debug)]
pub struct Sha256 {
    state: [u32; 8],
    /// The bytes of an incomplete block.
    block: [u8; 64],
    filled: usize,
    /// Every byte taken so far.
    len: u64,
}

impl Default for Sha256 {
    fn default() -> Self {
        Sha256::new()
    }
}

impl Sha256 {
    pub fn new() -> Sha256 {
        Sha256 {
            state: H0,
            block: [0; 64],
            filled: 0,
            len: 0,
        }
    }

    /// Takes the next bytes of the message.
    pub fn update(&mut self, mut data: &[u8]) {
        self.len = self.len.wrapping_add(data.len() as u64);
        if self.filled > 0 {
            let take = data.len().min(64 - self.filled);
            self.block[self.filled..self.filled + take].copy_from_slice(&data[..take]);
            self.filled += take;
            data = &data[take..];
            if self.filled < 64 {
                return;
            }
            let block = self.block;
            compress_blocks(&mut self.state, &block);
            self.filled = 0;
        }
        let whole = data.len() - data.len() % 64;
        compress_blocks(&mut self.state, &data[..whole]);
        let rest = &data[whole..];
        self.block[..rest.len()].copy_from_slice(rest);
        self.filled = rest.len();
    }

    /// How many bytes the message has so far.
    pub fn len(&self) -> u64 {
        self.len
    }

    /// Whether no byte was taken yet.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The digest of everything taken.
    pub fn finish(&self) -> [u8; 32] {
        let mut state = self.state;
        // Padding: 0x80, zeros, then the length in bits as a big-endian u64.
        let rest = &self.block[..self.filled];
        let mut tail = [0u8; 128];
        tail[..rest.len()].copy_from_slice(rest);
        tail[rest.len()] = 0x80;
        let len = if rest.len() < 56 { 64 } else { 128 };
        let bits = self.len.wrapping_mul(8);
        tail[len - 8..len].copy_from_slice(&bits.to_be_bytes());
        compress_blocks(&mut state, &tail[..len]);
        let mut out = [0u8; 32];
        for (chunk, word) in out.chunks_exact_mut(4).zip(state) {
            chunk.copy_from_slice(&word.to_be_bytes());
        }
        out
    }

    /// [`Sha256::finish`] as 64 lower-case hexadecimal digits.
    pub fn finish_hex(&self) -> String {
        hex(&self.finish())
    }
}

/// The SHA-256 digest of `data`.
pub fn sha256(data: &[u8]) -> [u8; 32] {
    let mut h = Sha256::new();
    h.update(data);
    h.finish()
}

/// A digest as 64 lower-case hexadecimal digits.
pub fn hex(digest: &[u8; 32]) -> String {
    digest.iter().map(|b| format!("{b:02x}")).collect()
}

/// The digest as 64 lower-case hexadecimal digits, as it appears in an argv.
pub fn sha256_hex(data: &[u8]) -> String {
    hex(&sha256(data))
}

/// Parses 64 hexadecimal digits (either case) into a digest. Nothing else is one: not
/// even the sign `u8::from_str_radix` would take (`+f` for `0f`), so each digest has
/// exactly the spellings its two cases give.
pub fn parse_hex(s: &str) -> Option<[u8; 32]> {
    if s.len() != 64 || !s.bytes().all(|b| b.is_ascii_hexdigit()) {
        return None;
    }
    let mut out = [0u8; 32];
    for (i, byte) in out.iter_mut().enumerate() {
        *byte = u8::from_str_radix(&s[2 * i..2 * i + 2], 16).ok()?;
    }
    Some(out)
}

/// Whether two digests are equal, comparing every byte (no early exit on a mismatch).
pub fn same(a: &[u8; 32], b: &[u8; 32]) -> bool {
    a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_published_test_vectors() {
        // FIPS 180-4 examples (NIST CSRC) and the empty message.
        let cases: [(&[u8], &str); 4] = [
            (
                b"",
                "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855",
            ),
            (
                b"abc",
                "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad",
            ),
            (
                b"abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq",
                "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1",
            ),
            (
                b"abcdefghbcdefghicdefghijdefghijkefghijklfghijklmghijklmnhijklmnoijklmnopjklmnopqklmnopqrlmnopqrsmnopqrstnopqrstu",
                "cf5b16a778af8380036ce59e7b0492370b249b11e8f07a51afac45037afee9d1",
            ),
        ];
        for (input, want) in cases {
            assert_eq!(sha256_hex(input), want);
        }
        let million_a = vec![b'a'; 1_000_000];
        assert_eq!(
            sha256_hex(&million_a),
            "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0"
        );
    }

    #[test]
    fn every_padding_boundary_agrees_with_python_hashlib() {
        // Lengths around the one-block / two-block padding split, for the bytes 0, 1, 2,
        // ... (mod 251), against values computed with Python's `hashlib.sha256`.
        let msg: Vec<u8> = (0..200u32).map(|i| (i % 251) as u8).collect();
        let known = [
            (
                0,
                "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855",
            ),
            (
                1,
                "6e340b9cffb37a989ca544e6bb780a2c78901d3fb33738768511a30617afa01d",
            ),
            (
                55,
                "463eb28e72f82e0a96c0a4cc53690c571281131f672aa229e0d45ae59b598b59",
            ),
            (
                56,
                "da2ae4d6b36748f2a318f23e7ab1dfdf45acdc9d049bd80e59de82a60895f562",
            ),
            (
                63,
                "29af2686fd53374a36b0846694cc342177e428d1647515f078784d69cdb9e488",
            ),
            (
                64,
                "fdeab9acf3710362bd2658cdc9a29e8f9c757fcf9811603a8c447cd1d9151108",
            ),
            (
                65,
                "4bfd2c8b6f1eec7a2afeb48b934ee4b2694182027e6d0fc075074f2fabb31781",
            ),
            (
                119,
                "da18797ed7c3a777f0847f429724a2d8cd5138e6ed2895c3fa1a6d39d18f7ec6",
            ),
            (
                120,
                "f52b23db1fbb6ded89ef42a23ce0c8922c45f25c50b568a93bf1c075420bbb7c",
            ),
            (
                128,
                "471fb943aa23c511f6f72f8d1652d9c880cfa392ad80503120547703e56a2be5",
            ),
            (
                200,
                "1901da1c9f699b48f6b2636e65cbf73abf99d0441ef67f5c540a42f7051dec6f",
            ),
        ];
        for (n, want) in known {
            assert_eq!(sha256_hex(&msg[..n]), want, "length {n}");
        }
    }

    #[test]
    fn pieces_of_any_size_give_the_digest_of_the_whole() {
        let msg: Vec<u8> = (0..1000u32).map(|i| (i * 7 % 251) as u8).collect();
        let whole = sha256(&msg);
        for piece in [1, 3, 55, 63, 64, 65, 127, 128, 999, 1000] {
            let mut h = Sha256::new();
            for chunk in msg.chunks(piece) {
                h.update(chunk);
            }
            assert_eq!(h.finish(), whole, "pieces of {piece}");
            assert_eq!(h.len(), 1000);
        }
        // Pieces of changing sizes, an empty one included.
        let mut h = Sha256::new();
        let mut at = 0;
        for (i, size) in [0usize, 1, 62, 2, 64, 200, 0, 671].iter().enumerate() {
            h.update(&msg[at..at + size]);
            at += size;
            assert!(i > 0 || h.is_empty());
        }
        assert_eq!(at, 1000);
        assert_eq!(h.finish(), whole);
        assert_eq!(
            Sha256::new().finish_hex(),
            "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
        );
    }

    #[test]
    fn the_portable_code_and_the_cpus_instructions_agree() {
        // The CPU's rounds, where it has them, agree with the portable ones block by
        // block, on many states.
        let msg: Vec<u8> = (0..64 * 400u32).map(|i| (i * 131 % 256) as u8).collect();
        #[cfg(target_arch = "x86_64")]
        if std::arch::is_x86_feature_detected!("sha")
            && std::arch::is_x86_feature_detected!("sse4.1")
            && std::arch::is_x86_feature_detected!("ssse3")
        {
            let mut fast = H0;
            let mut slow = H0;
            for block in msg.chunks_exact(64) {
                // SAFETY: the CPU was just found to have every feature it enables.
                unsafe { shani::compress_blocks(&mut fast, block) };
                compress(&mut slow, block);
                assert_eq!(fast, slow);
            }
        }
        // Whichever `compress_blocks` chooses, short and long inputs alike.
        assert!(msg.len() >= SHA_NI_FROM);
        for len in [64, SHA_NI_FROM - 64, SHA_NI_FROM, msg.len()] {
            let mut chosen = H0;
            let mut slow = H0;
            compress_blocks(&mut chosen, &msg[..len]);
            for block in msg[..len].chunks_exact(64) {
                compress(&mut slow, block);
            }
            assert_eq!(chosen, slow, "length {len}");
        }
    }

    #[test]
    fn hex_round_trips_and_rejects_anything_else() {
        let d = sha256(b"abc");
        assert_eq!(parse_hex(&sha256_hex(b"abc")), Some(d));
        assert_eq!(parse_hex(&sha256_hex(b"abc").to_uppercase()), Some(d));
        // A sign before a pair is no digit, though `from_str_radix` would read "+a" as 10.
        let signed = format!("+a{}", "a".repeat(62));
        for bad in [
            "",
            "ab",
            &"g".repeat(64),
            &"a".repeat(63),
            &"a".repeat(65),
            &signed,
        ] {
            assert_eq!(parse_hex(bad), None, "{bad}");
        }
        assert!(same(&d, &d));
        assert!(!same(&d, &sha256(b"abd")));
    }
}
