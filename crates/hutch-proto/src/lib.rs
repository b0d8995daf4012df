//! The hutch agent protocol: how the host talks to `hutch-agent` inside every sandbox.
//!
//! See `VERSIONING.md` in this crate for the compatibility rules and `spec/agent-protocol.md`
//! for the wire format. [`messages`] holds the typed messages, [`codec`] the framing.
#![forbid(unsafe_code)]

pub mod codec;
pub mod messages;

pub use codec::{
    check_total, decode_frame, encode_frame, read_frame, write_frame, CodecError, Frame, MAX_BODY,
    MAX_HEADER,
};
pub use messages::*;

/// The protocol generation. Bumped only for incompatible changes; new optional fields do not
/// bump it (see VERSIONING.md).
pub const PROTOCOL_VERSION: u32 = 1;

/// Largest payload a single file chunk carries; bigger files are moved in several requests.
pub const FILE_CHUNK: usize = 4 * 1024 * 1024;

/// Appended once to a stream whose output passed the exec's `output_limit`.
pub const TRUNCATION_MARKER: &str = "\n[hutch: output truncated]\n";
