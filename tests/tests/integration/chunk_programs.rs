//! Chunk programs written in Rust with the MSCCLang-style builder.
