fn main() { eprintln!("record: not implemented yet"); std::process::exit(255); }
