//! The handler as a program: `hutch-gateway-handler WORKLOAD [ITERS] [COUNTER]`, the upstream
//! body (proxy) on stdin, the response body on stdout; a bad request exits 2 with the reason on
//! stderr. Built natively (a process per request) and for wasm32-wasip1 (an instance per
//! request).
use std::io::{Read, Write};

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let num = |i: usize| args.get(i).and_then(|v| v.parse().ok()).unwrap_or(0);
    let workload = args.first().map(String::as_str).unwrap_or("");
    let mut upstream = Vec::new();
    if workload == "proxy" {
        let _ = std::io::stdin().read_to_end(&mut upstream);
    }
    let req = hutch_gateway_handler::Request {
        workload,
        iters: num(1),
        counter: num(2),
        upstream: &upstream,
    };
    match hutch_gateway_handler::handle(&req) {
        Ok(body) => {
            let _ = std::io::stdout().write_all(&body);
        }
        Err(m) => {
            eprintln!("{m}");
            std::process::exit(2);
        }
    }
}
