//! An LLM proxy limited in tokens per minute per API key, in front of a fake streaming model.
//!
//! Each `POST /v1/chat/completions` reserves its `max_tokens` (256 when it names none) plus its
//! prompt's tokens ([`flowgate::Limiter::reserve`]) under the key of its `Authorization: Bearer`
//! header, streams the model's answer through, and commits the `usage.total_tokens` of the
//! stream's last chunk; a stream cut short commits the estimate. Answers carry `RateLimit-*` and OpenAI's
//! `x-ratelimit-*-tokens` headers; over the budget, 429 with `Retry-After`. The fake model
//! echoes the last message's words, one a chunk, at most `max_tokens` (one token a word).
//!
//! ```text
//! cargo run -p flowgate --example llm_proxy
//! curl -sN -D - localhost:3000/v1/chat/completions -H 'Authorization: Bearer sk-alice' \
//!   -d '{"model":"fake","max_tokens":200,"stream":true,"messages":[{"role":"user","content":"say these six words back please"}]}'
//! ```
//!
//! The budget is 2,000 tokens a minute per key (`TOKENS_PER_MINUTE` to change it). Three
//! requests at once reserving 940 tokens each (the 40 words stream for 2 s): two fit, the third
//! is refused while they run.
//!
//! ```text
//! for i in 1 2 3; do curl -s -o /dev/null -w '%{http_code}\n' localhost:3000/v1/chat/completions \
//!   -H 'Authorization: Bearer sk-alice' \
//!   -d '{"max_tokens":900,"messages":[{"role":"user","content":"'"$(seq -s ' ' 40)"'"}]}' & done; wait
//! # 429 200 200, in some order
//! ```

use std::sync::Arc;
use std::time::Duration;

use flowgate::{Limiter, MemoryStore};

#[path = "llm_proxy/app.rs"]
mod app;

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let tpm = match std::env::var("TOKENS_PER_MINUTE") {
        Ok(v) => v.parse()?,
        Err(_) => 2_000,
    };
    let limiter = Arc::new(Limiter::new(app::rules(tpm), MemoryStore::new()));
    let router = app::router(limiter, Duration::from_millis(50));
    let addr = std::env::var("ADDR").unwrap_or_else(|_| "127.0.0.1:3000".into());
    let listener = tokio::net::TcpListener::bind(&addr).await?;
    println!("LLM proxy on http://{addr}/v1/chat/completions, {tpm} tokens a minute per API key");
    axum::serve(listener, router).await?;
    Ok(())
}
