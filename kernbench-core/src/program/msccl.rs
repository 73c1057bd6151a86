//! MSCCL-IR XML in and out.
