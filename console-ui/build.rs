//! Rebuilds the crate when a console build adds or removes files in `dist/` (changed
//! files are tracked by the embedding itself).

fn main() {
    println!("cargo:rerun-if-changed=dist");
    println!("cargo:rerun-if-changed=dist/assets");
}
