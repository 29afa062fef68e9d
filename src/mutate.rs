//! Random mutations of a JSON text for differential tests: each replaces, inserts or
//! removes one or two bytes, drawn from JSON's own characters and a few that are not
//! (a control character, a lone continuation byte, an invalid byte). Seeded, so a failure
//! repeats.

/// The bytes mutations draw from.
const ALPHABET: &[u8] = b"{}[]:,\"\\ 0123456789-+.eEtrufalsnxu/\x01\t\n\x7f\xc3\xa9\xff";

/// A xorshift generator: no dependency, and the same sequence on every run.
pub(crate) struct Mutations {
    seed: u64,
}

impl Mutations {
    pub(crate) fn new() -> Mutations {
        Mutations {
            seed: 0x2545_f491_4f6c_dd1d,
        }
    }

    /// A number below `below` (at least 1).
    pub(crate) fn below(&mut self, below: usize) -> usize {
        self.seed ^= self.seed << 13;
        self.seed ^= self.seed >> 7;
        self.seed ^= self.seed << 17;
        (self.seed % below as u64) as usize
    }

    /// `original` with one or two bytes replaced, inserted or removed.
    pub(crate) fn of(&mut self, original: &[u8]) -> Vec<u8> {
        let mut body = original.to_vec();
        for _ in 0..=self.below(2) {
            if body.is_empty() {
                break;
            }
            let at = self.below(body.len());
            let byte = ALPHABET[self.below(ALPHABET.len())];
            match self.below(3) {
                0 => body[at] = byte,
                1 => body.insert(at, byte),
                _ => {
                    body.remove(at);
                }
            }
        }
        body
    }
}
