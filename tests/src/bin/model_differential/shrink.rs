//! Shrinking a disagreement: drop policy items and tree entries one at a time, keeping
//! each drop after which the same operation on the same path still disagrees.

use super::{Case, Disagreement, Outcome, is_within};
use crate::Harness;

/// The most cases one shrink runs (each is a confine and a probe).
const MAX_TRIES: usize = 80;

impl Case {
    pub fn shrink(&self, fx: &Harness, d: &Disagreement) -> Case {
        let mut best = self.clone();
        let mut tries = 0;
        let mut progress = true;
        let began = std::time::Instant::now();
        let out_of_time = || began.elapsed().as_secs() >= fx.shrink_seconds;
        while progress && tries < MAX_TRIES && !out_of_time() {
            progress = false;
            for candidate in best.smaller(d) {
                if tries >= MAX_TRIES || out_of_time() {
                    break;
                }
                tries += 1;
                if candidate.still_disagrees(fx, d, 1_000 + tries as u64) {
                    best = candidate;
                    progress = true;
                    break;
                }
            }
        }
        best
    }

    fn still_disagrees(&self, fx: &Harness, d: &Disagreement, n: u64) -> bool {
        match self.run(fx, n) {
            Outcome::Ran(report) => report
                .disagreements
                .iter()
                .any(|x| x.op == d.op && x.path == d.path && x.into == d.into),
            Outcome::Refused { .. } => false,
        }
    }

    /// Every case one item smaller: a policy item less, or a tree entry (with what lies
    /// beneath it) less, never the paths the disagreement names.
    fn smaller(&self, d: &Disagreement) -> Vec<Case> {
        let mut out = Vec::new();
        let vary = |f: &dyn Fn(&mut Case)| {
            let mut c = self.clone();
            f(&mut c);
            c
        };
        for i in 0..self.hide.len() {
            out.push(vary(&|c| {
                c.hide.remove(i);
            }));
        }
        for i in 0..self.writable.len() {
            out.push(vary(&|c| {
                c.writable.remove(i);
            }));
        }
        for i in 0..self.protect.len() {
            out.push(vary(&|c| {
                c.protect.remove(i);
            }));
        }
        if self.tmp_private {
            out.push(vary(&|c| c.tmp_private = false));
        }
        if self.keep_dac {
            out.push(vary(&|c| c.keep_dac = false));
        }
        if self.unix_sockets {
            out.push(vary(&|c| c.unix_sockets = false));
        }
        let named: Vec<&str> = [Some(d.path.as_str()), d.into.as_deref()]
            .into_iter()
            .flatten()
            .chain(std::iter::once(self.workspace.as_str()))
            .chain(self.writable.iter().map(String::as_str))
            .chain(self.hide.iter().map(String::as_str))
            .chain(self.protect.iter().map(String::as_str))
            .collect();
        for (p, _) in self.entries.iter().rev() {
            if p.is_empty() || named.iter().any(|n| is_within(n, p)) {
                continue;
            }
            let p = p.clone();
            out.push(vary(&|c| {
                c.entries.retain(|(q, _)| !is_within(q, &p));
                c.dests
                    .retain(|q, into| !is_within(q, &p) && !is_within(into, &p));
            }));
        }
        out
    }
}
