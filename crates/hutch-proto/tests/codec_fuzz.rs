//! Deterministic fuzzing of the frame decoder (the trust boundary the host reads guest bytes
//! through): random and mutated frames must decode or fail cleanly, never panic or allocate more
//! than the limits allow. `fuzz/` holds the same property as a cargo-fuzz target for long runs.
use hutch_proto::{encode_frame, read_frame, CodecError, Request, Response};

struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
}

fn decode_all(bytes: &[u8]) {
    let mut cur = std::io::Cursor::new(bytes);
    for _ in 0..64 {
        match read_frame::<Response, _>(&mut cur) {
            Ok(_) => continue,
            Err(CodecError::Closed) => break,
            Err(_) => break,
        }
    }
    let mut cur = std::io::Cursor::new(bytes);
    let _ = read_frame::<Request, _>(&mut cur);
}

#[test]
fn random_and_mutated_frames_never_panic() {
    let mut rng = Rng(0x2545_f491_4f6c_dd1d);
    let seeds: Vec<Vec<u8>> = vec![
        encode_frame(&Response::Ok { id: 1 }, b"").expect("enc"),
        encode_frame(&Response::Stdout { id: 9 }, b"hello world").expect("enc"),
        encode_frame(&Request::Health { id: 3 }, b"").expect("enc"),
    ];
    for i in 0..20_000 {
        let mut buf = seeds[i % seeds.len()].clone();
        match rng.below(4) {
            0 => {
                let n = rng.below(buf.len());
                buf[n] = rng.next() as u8;
            }
            1 => buf.truncate(rng.below(buf.len() + 1)),
            2 => {
                let extra = rng.below(64);
                buf.extend((0..extra).map(|_| rng.next() as u8));
            }
            _ => buf = (0..rng.below(96)).map(|_| rng.next() as u8).collect(),
        }
        decode_all(&buf);
    }
}

#[test]
fn a_huge_length_prefix_is_rejected_before_allocating() {
    let mut bytes = u32::MAX.to_be_bytes().to_vec();
    bytes.extend_from_slice(&[0; 16]);
    let mut cur = std::io::Cursor::new(bytes);
    assert!(matches!(read_frame::<Response, _>(&mut cur), Err(CodecError::BodyTooLarge(_))));
}
