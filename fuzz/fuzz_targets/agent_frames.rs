//! Bytes from a guest agent (or, on the agent side, from the host) through the frame decoder:
//! must decode or fail cleanly. Run: `cargo +nightly fuzz run agent_frames` (from `fuzz/`).
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let mut cur = std::io::Cursor::new(data);
    while let Ok(f) = hutch_proto::read_frame::<serde_json::Value, _>(&mut cur) {
        let _ = serde_json::from_value::<hutch_proto::Response>(f.header.clone());
        let _ = serde_json::from_value::<hutch_proto::Request>(f.header);
    }
});
