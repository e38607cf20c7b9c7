use super::*;
use std::collections::HashMap;

/// What llama.cpp 0.3.36 returned for every builtin template name, NULL, its SmolLM2 model's Jinja
/// template and a marker string for every family it recognises (see the file's header).
const RECORDED: &str = include_str!("llama_cpp_templates.txt");

/// The conversations the recording used, by number.
fn conversation(n: usize) -> Vec<Message<'static>> {
    let m = |role: &'static str, content: &'static str| Message {
        role: role.as_bytes(),
        content: content.as_bytes(),
    };
    match n {
        0 => vec![m("user", "Hello")],
        1 => vec![
            m("system", "You are a helpful assistant."),
            m("user", "Hi there"),
            m("assistant", "Hello! How can I help?"),
            m("user", "What is 2+2?"),
        ],
        2 => vec![
            m("user", "  padded text  \n"),
            m("assistant", " reply with spaces "),
            m("user", "second"),
        ],
        3 => vec![m("system", "Sys only")],
        _ => vec![
            m("system", "S1"),
            m("user", "u1"),
            m("assistant", "a1"),
            m("user", "u2"),
            m("assistant", "a2"),
        ],
    }
}

fn unhex(s: &str) -> Vec<u8> {
    (0..s.len() / 2)
        .map(|i| u8::from_str_radix(&s[2 * i..2 * i + 2], 16).expect("hex"))
        .collect()
}

/// llama_chat_apply_template's result: the formatted chat, or None where it returns -1.
fn ours(tmpl: Option<&[u8]>, chat: &[Message], add_ass: bool) -> Option<Vec<u8>> {
    detect(tmpl.unwrap_or(b"chatml")).map(|f| apply(f, chat, add_ass))
}

#[test]
fn every_template_formats_as_llama_cpp_does() {
    let mut templates: HashMap<&str, Option<Vec<u8>>> = HashMap::new();
    let mut checked = 0;
    for line in RECORDED.lines().filter(|l| !l.starts_with('#')) {
        let f: Vec<&str> = line.split(' ').collect();
        match f[0] {
            "T" => {
                let t = match f[2] {
                    "-" => None,
                    "=" => Some(Vec::new()),
                    hex => Some(unhex(hex)),
                };
                templates.insert(f[1], t);
            }
            "R" => {
                let tmpl = templates[f[1]].as_deref();
                let chat = conversation(f[2].parse().expect("conv"));
                let add_ass = f[3] == "1";
                let rc: i32 = f[4].parse().expect("rc");
                let got = ours(tmpl, &chat, add_ass);
                let what = format!("template {} conversation {} add_ass {add_ass}", f[1], f[2]);
                if rc < 0 {
                    assert!(got.is_none(), "{what}: llama.cpp refuses it, we gave {got:?}");
                } else {
                    let want = if f[5] == "-" { Vec::new() } else { unhex(f[5]) };
                    let got = got.unwrap_or_else(|| panic!("{what}: not recognised"));
                    assert_eq!(String::from_utf8_lossy(&got), String::from_utf8_lossy(&want), "{what}");
                    assert_eq!(got.len(), rc as usize, "{what}");
                }
                checked += 1;
            }
            _ => {}
        }
    }
    assert_eq!(checked, 1140, "recorded results checked");
}

#[test]
fn builtin_names_are_llama_cpps_in_its_order() {
    let line = RECORDED.lines().find(|l| l.starts_with("B ")).expect("builtin line");
    let names: Vec<&str> = BUILTIN.iter().map(|(n, _)| n.to_str().expect("ascii")).collect();
    assert_eq!(names, line[2..].split(' ').collect::<Vec<_>>());
}

#[test]
fn trimming_uses_c_white_space() {
    assert_eq!(trim(b" \t\n\x0b\x0c\rx y\r\n"), b"x y");
    assert_eq!(trim(b"   "), b"");
    assert_eq!(
        trim(b"\xc2\xa0x"),
        b"\xc2\xa0x",
        "a non-breaking space is not C white space"
    );
}
