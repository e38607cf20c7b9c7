//! Splitting special tokens (control, user-defined, unknown) out of the text before tokenizing.
//!
//! llama.cpp takes the special tokens longest first and, for each, splits every remaining piece of
//! raw text at each of its occurrences (leftmost first, not overlapping), honouring the token's
//! lstrip/rstrip attributes. Doing that for every special token costs a scan of the text per token
//! (Gemma 3 has over 6000); here one pass over a trie finds which special tokens occur at all, and
//! only those are split out, in the same order, with the same result.

/// A piece of the input after special-token splitting.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Fragment {
    /// Bytes `start..end` of the input, to be tokenized.
    Text(usize, usize),
    Token(u32),
}

/// What splitting needs to know about one special token.
pub(super) struct Special<'a> {
    pub(super) id: u32,
    pub(super) text: &'a [u8],
    pub(super) lstrip: bool,
    pub(super) rstrip: bool,
}

/// The special tokens, in llama.cpp's order (longest text first), in a trie over their texts.
pub(super) struct Specials {
    /// Token ids in splitting order.
    order: Vec<u32>,
    /// Trie nodes; node 0 is the root.
    nodes: Vec<Node>,
    /// Children of all nodes, `(byte, node)` sorted by byte within a node.
    edges: Vec<(u8, u32)>,
}

#[derive(Clone, Copy, Default)]
struct Node {
    /// Index into `order` of the token whose text ends here, or `u32::MAX`.
    token: u32,
    first_edge: u32,
    n_edges: u32,
}

impl Specials {
    /// `ids` are the special tokens in id order; `text` gives a token's text.
    pub(super) fn new<'a>(ids: Vec<u32>, text: impl Fn(u32) -> &'a [u8]) -> Specials {
        let mut order = ids;
        // llama.cpp uses std::sort by length (not stable); equal lengths are kept in id order here,
        // which only matters if two equally long special tokens can overlap in a text.
        order.sort_by_key(|&id| std::cmp::Reverse(text(id).len()));

        // Build with sorted texts so each node's children are created in byte order and contiguous.
        let mut by_text: Vec<u32> = (0..order.len() as u32).collect();
        by_text.sort_by(|&a, &b| text(order[a as usize]).cmp(text(order[b as usize])));
        let mut tmp: Vec<(Node, Vec<(u8, u32)>)> = vec![(
            Node {
                token: u32::MAX,
                ..Node::default()
            },
            Vec::new(),
        )];
        for &k in &by_text {
            let mut node = 0usize;
            for &b in text(order[k as usize]) {
                node = match tmp[node].1.iter().find(|e| e.0 == b) {
                    Some(&(_, child)) => child as usize,
                    None => {
                        let child = tmp.len();
                        tmp.push((
                            Node {
                                token: u32::MAX,
                                ..Node::default()
                            },
                            Vec::new(),
                        ));
                        tmp[node].1.push((b, child as u32));
                        child
                    }
                };
            }
            tmp[node].0.token = k;
        }
        let mut nodes = Vec::with_capacity(tmp.len());
        let mut edges = Vec::new();
        for (mut node, children) in tmp {
            node.first_edge = edges.len() as u32;
            node.n_edges = children.len() as u32;
            edges.extend(children);
            nodes.push(node);
        }
        Specials { order, nodes, edges }
    }

    fn child(&self, node: usize, b: u8) -> Option<usize> {
        let n = self.nodes[node];
        let edges = &self.edges[n.first_edge as usize..(n.first_edge + n.n_edges) as usize];
        edges
            .binary_search_by_key(&b, |e| e.0)
            .ok()
            .map(|i| edges[i].1 as usize)
    }

    /// Splits `text` at the special tokens `wanted` accepts (by id). `describe` gives a token's text
    /// and strip attributes.
    pub(super) fn split<'a>(
        &self,
        text: &[u8],
        wanted: impl Fn(u32) -> bool,
        describe: impl Fn(u32) -> Special<'a>,
    ) -> Vec<Fragment> {
        let mut fragments = Vec::new();
        if text.is_empty() {
            return fragments;
        }
        fragments.push(Fragment::Text(0, text.len()));
        if self.order.is_empty() {
            return fragments;
        }

        // Which special tokens occur anywhere in the text.
        let mut occurs = vec![false; self.order.len()];
        let mut any = false;
        for start in 0..text.len() {
            let mut node = 0;
            for &b in &text[start..] {
                match self.child(node, b) {
                    Some(c) => node = c,
                    None => break,
                }
                let k = self.nodes[node].token;
                if k != u32::MAX && !occurs[k as usize] && wanted(self.order[k as usize]) {
                    occurs[k as usize] = true;
                    any = true;
                }
            }
        }
        if !any {
            return fragments;
        }

        for (k, _) in occurs.iter().enumerate().filter(|(_, &o)| o) {
            let special = describe(self.order[k]);
            let shift = horspool_shifts(special.text);
            let mut next = Vec::with_capacity(fragments.len() + 2);
            for &f in &fragments {
                match f {
                    Fragment::Text(a, b) => split_at_token(text, a, b, &special, &shift, &mut next),
                    token => next.push(token),
                }
            }
            fragments = next;
        }
        fragments
    }
}

/// Splits the text piece `a..b` at each occurrence of one special token.
fn split_at_token(text: &[u8], a: usize, b: usize, s: &Special, shift: &[u8; 256], out: &mut Vec<Fragment>) {
    // llama.cpp strips with C `isspace`.
    let space = |c: u8| matches!(c, b' ' | b'\t' | b'\n' | 0x0b | 0x0c | b'\r');
    let mut cur = a;
    while let Some(at) = find(&text[cur..b], s.text, shift).map(|p| cur + p) {
        let mut left_end = at;
        if s.lstrip {
            while left_end > cur && space(text[left_end - 1]) {
                left_end -= 1;
            }
        }
        if left_end > cur {
            out.push(Fragment::Text(cur, left_end));
        }
        out.push(Fragment::Token(s.id));
        cur = at + s.text.len();
        if s.rstrip {
            while cur < b && space(text[cur]) {
                cur += 1;
            }
        }
    }
    if cur < b {
        out.push(Fragment::Text(cur, b));
    }
}

/// First occurrence of `needle` in `hay` (Horspool: compare the window's last byte, shift by how far
/// that byte is from the needle's end). `shift` is [`horspool_shifts`] of the needle.
fn find(hay: &[u8], needle: &[u8], shift: &[u8; 256]) -> Option<usize> {
    let m = needle.len();
    let (&last, init) = needle.split_last()?;
    let mut p = 0;
    while p + m <= hay.len() {
        let c = hay[p + m - 1];
        if c == last && hay[p..p + m - 1] == *init {
            return Some(p);
        }
        p += usize::from(shift[usize::from(c)]);
    }
    None
}

/// Horspool's shift per byte value: distance from the byte's last position before the needle's last
/// byte to the end (the whole length, capped at 255, if absent).
fn horspool_shifts(needle: &[u8]) -> [u8; 256] {
    let m = needle.len().min(255);
    let mut shift = [m as u8; 256];
    let n = needle.len();
    for (i, &b) in needle.iter().enumerate().take(n.saturating_sub(1)) {
        let d = n - 1 - i;
        if d < 256 {
            shift[usize::from(b)] = shift[usize::from(b)].min(d as u8);
        }
    }
    shift
}
