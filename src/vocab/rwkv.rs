//! RWKV's "world" tokenizer (`tokenizer.ggml.model = rwkv`) as llama.cpp runs it: token texts are
//! Python byte-string escapes (`\n`, `\xNN`, ...) of arbitrary bytes; the text is cut greedily,
//! left to right, into the longest token whose unescaped bytes start there.

use super::store::FastMap;

/// The bytes an escaped token text stands for, decoded as llama.cpp's parser does: `\t`, `\n`,
/// `\r`, `\xNN`, and any other escaped byte as itself. Its hex digits are read leniently (a
/// byte from `a` to 0x7f counts from `a` as 10, any other from `0`, in 8-bit arithmetic), and an
/// escape cut off at the end is dropped.
pub(super) fn unescape(text: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(text.len());
    let mut escaping = false;
    let mut hex_left = 0u8;
    let mut acc = 0u8;
    for &c in text {
        if hex_left > 0 {
            let digit = if (b'a'..0x80).contains(&c) {
                c - b'a' + 10
            } else {
                c.wrapping_sub(b'0')
            };
            acc = (acc << 4).wrapping_add(digit);
            hex_left -= 1;
            if hex_left == 0 {
                out.push(acc);
                acc = 0;
            }
        } else if escaping {
            match c {
                b't' => out.push(b'\t'),
                b'n' => out.push(b'\n'),
                b'r' => out.push(b'\r'),
                b'x' => hex_left = 2,
                _ => out.push(c),
            }
            escaping = false;
        } else if c == b'\\' {
            escaping = true;
        } else {
            out.push(c);
        }
    }
    out
}

/// A trie over the tokens' unescaped bytes.
pub(super) struct Rwkv {
    /// Child of (node, byte); node 0 is the root.
    edges: FastMap<(u32, u8), u32>,
    /// The token ending at each node. Where two tokens unescape alike, the later id holds it.
    tokens: Vec<Option<u32>>,
}

impl Rwkv {
    /// The trie of the tokens' texts (`text(id)` for ids `0..n`).
    pub(super) fn new<'a>(n: usize, text: impl Fn(usize) -> &'a [u8]) -> Rwkv {
        let mut trie = Rwkv {
            edges: FastMap::default(),
            tokens: vec![None],
        };
        for id in 0..n {
            let mut node = 0u32;
            for b in unescape(text(id)) {
                let next = trie.tokens.len() as u32;
                node = *trie.edges.entry((node, b)).or_insert(next);
                if node == next {
                    trie.tokens.push(None);
                }
            }
            trie.tokens[node as usize] = Some(id as u32);
        }
        trie
    }

    fn child(&self, node: u32, b: u8) -> Option<u32> {
        self.edges.get(&(node, b)).copied()
    }

    /// Appends the tokens of `text`. A byte that starts no token becomes `unk` (whatever it is,
    /// `TOKEN_NULL` included, as in llama.cpp). Where bytes start tokens but none of them ends,
    /// llama.cpp starts over from the beginning of the text forever; that is an error here.
    pub(super) fn tokenize(&self, text: &[u8], unk: i32, out: &mut Vec<i32>) -> Result<(), String> {
        let mut at = 0;
        while at < text.len() {
            let mut node = 0;
            let mut longest = None;
            for (len, &b) in text[at..].iter().enumerate() {
                match self.child(node, b) {
                    Some(c) => node = c,
                    None => break,
                }
                if let Some(id) = self.tokens[node as usize] {
                    longest = Some((id, len + 1));
                }
            }
            match longest {
                Some((id, len)) => {
                    out.push(id as i32);
                    at += len;
                }
                None if self.child(0, text[at]).is_none() => {
                    out.push(unk);
                    at += 1;
                }
                None => {
                    return Err(format!(
                        "no RWKV token matches the text at byte {at}, though some start with its byte 0x{:02x} \
                         (llama.cpp would loop forever here)",
                        text[at]
                    ))
                }
            }
        }
        Ok(())
    }
}
