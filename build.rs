//! Generates `include/llama.h` from `src/ffi/` (only: engine internals stay out of the header) with
//! cbindgen, compiles the library's one C++ file (`src/ffi/cxx_abi.cpp`, see
//! `src/ffi/llama_ext.rs`) and sets the SONAME.
//!
//! The header is always written to `$OUT_DIR/llama.h`. Outside CI it is also copied to
//! `include/llama.h` when it changed, so a developer's build keeps the committed header current; in
//! CI (`CI` set) the committed file is left alone and a test compares the two, failing on drift.

use std::path::PathBuf;

fn main() {
    println!("cargo:rerun-if-changed=src/ffi");
    println!("cargo:rerun-if-changed=cbindgen.toml");
    println!("cargo:rerun-if-env-changed=CI");
    println!("cargo:rerun-if-env-changed=GGML_SRC");
    println!("cargo:rustc-cdylib-link-arg=-Wl,-soname,libengine.so.0");

    let root = PathBuf::from(std::env::var("CARGO_MANIFEST_DIR").expect("CARGO_MANIFEST_DIR"));

    // The ggml headers of the tree qts_ggml_sys builds (GGML_SRC, set by .cargo/config.toml).
    let ggml = PathBuf::from(std::env::var("GGML_SRC").expect("GGML_SRC (see vendor/README.md)"));
    cc::Build::new()
        .cpp(true)
        .std("c++17")
        .file(root.join("src/ffi/cxx_abi.cpp"))
        .include(ggml.join("include"))
        .warnings_into_errors(true)
        .compile("engine_cxx");
    let out = PathBuf::from(std::env::var("OUT_DIR").expect("OUT_DIR"));
    let config = cbindgen::Config::from_file(root.join("cbindgen.toml")).expect("cbindgen.toml");
    let header = cbindgen::Builder::new()
        .with_src(root.join("src/ffi/mod.rs"))
        .with_config(config)
        .generate()
        .expect("cbindgen could not generate llama.h");
    header.write_to_file(out.join("llama.h"));

    if std::env::var_os("CI").is_none() {
        let generated = std::fs::read(out.join("llama.h")).expect("generated header");
        let committed = root.join("include").join("llama.h");
        if std::fs::read(&committed).ok().as_deref() != Some(&generated[..]) {
            std::fs::create_dir_all(root.join("include")).expect("include/");
            std::fs::write(&committed, generated).expect("write include/llama.h");
        }
    }
}
