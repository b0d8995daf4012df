//! What an E2B client sends that hutch parses itself: Connect stream envelopes (split anywhere),
//! stream request messages, the sandbox list query (its metadata filter is encoded three times)
//! and `/files` query pairs. Each must parse or fail cleanly.
//! Run: `cargo +nightly fuzz run e2b_wire` (from `fuzz/`).
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let cut = data.first().map_or(0, |b| *b as usize % (data.len() + 1));
    let mut d = hutch_e2b::connect::Decoder::default();
    d.push(&data[..cut]);
    while let Ok(Some(_)) = d.next_envelope() {}
    d.push(&data[cut..]);
    while let Ok(Some(_)) = d.next_envelope() {}
    let _ = hutch_e2b::connect::stream_request::<serde_json::Value>(data);
    let text = String::from_utf8_lossy(data);
    let _ = hutch_e2b::rest::parse_list_query(Some(&text));
    let pairs: Vec<(String, String)> = form_urlencoded::parse(data)
        .map(|(k, v)| (k.into_owned(), v.into_owned()))
        .collect();
    let _ = hutch_e2b::files::FilesQuery::from_pairs(&pairs);
});
