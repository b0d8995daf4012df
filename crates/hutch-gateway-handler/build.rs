//! The WebAssembly build of the handler gets a 64 KiB stack (the wasm-ld and C default) instead
//! of Rust's 1 MiB: the handler needs little, and its linear memory is then 2 pages instead of
//! 17, which is what the engine has to scan and reset after every request.
fn main() {
    if std::env::var("CARGO_CFG_TARGET_ARCH").as_deref() == Ok("wasm32") {
        println!("cargo:rustc-link-arg-bins=-zstack-size=65536");
    }
}
