"""`GenerativeLM`: what kbert's decoding loop (`kbert.models.generation`) needs from a
model, declared in one place, and the generation methods every causal LM and
encoder-decoder shares (`generate`, `generate_ids`, `stream`), written once.

A model declares:
    end_token_id, vocab_size, max_positions    (by default the config's end_token_id,
                                                vocab_size, max_position_embeddings)
    generation_step(token_ids, positions, key_mask, cache, index)
                    -> (float32 logits [B, V] at the last position, the updated cache)
and, by its kind (`is_encoder_decoder`):
    a causal LM:        generation_cache(batch, length) -> an empty key/value cache
    an encoder-decoder: generation_start(token_ids, padding_mask, capacity)
                        -> (logits [B, V] after the decoder's start, the cache, the
                            decoder's prompt [B, P'])
Optional, with defaults here: `reorder_generation_cache` (beam search: every cache
tensor gathered on its first axis, read batch-major), `forced_end_token_id` (None; BART:
its config's), `max_input_length` (None: the tokenizer's length; an encoder's
positions), `tokenizer` (set by `from_pretrained` or the user)."""

from __future__ import annotations

from typing import ClassVar


class GenerativeLM:
    """See the module docstring. Listed before `keras.Model` among a model's bases."""

    is_encoder_decoder: ClassVar[bool] = False
    tokenizer = None  # the model's tokenizer, for text in and out
    forced_end_token_id: ClassVar[int | None] = None
    max_input_length: ClassVar[int | None] = None

    # ------------------------------------------------- the protocol
    # (end token, vocabulary and positions: the config's, unless a model says otherwise)
    @property
    def end_token_id(self) -> int | None:
        return self.config.end_token_id

    @property
    def vocab_size(self) -> int:
        return self.config.vocab_size

    @property
    def max_positions(self) -> int:
        return self.config.max_position_embeddings

    def generation_step(self, token_ids, positions, key_mask, cache, index):
        raise NotImplementedError(f"{type(self).__name__}: generation_step")

    def generation_cache(self, batch_size, length):
        raise NotImplementedError(f"{type(self).__name__} is an encoder-decoder: its cache "
                                  "comes from generation_start")

    def generation_start(self, token_ids, padding_mask, capacity):
        raise NotImplementedError(f"{type(self).__name__} is a causal LM: its cache comes "
                                  "from generation_cache")

    def reorder_generation_cache(self, cache, rows):
        """The cache of batch rows `rows` [B'] (beam search): every tensor gathered on
        its first axis, read as [batch, ...] (GPT's [B * heads, S, D] caches are
        batch-major)."""
        import tensorflow as tf

        batch = tf.shape(rows)[0]

        def gather(x):
            shape = tf.shape(x)
            grouped = tf.reshape(x, tf.concat([[batch, -1], shape[1:]], 0))
            return tf.reshape(tf.gather(grouped, rows), shape)

        return tf.nest.map_structure(gather, cache)

    # ------------------------------------------------- generation, once
    def generate(self, prompts, max_new_tokens: int = 32, sampler: str = "greedy",
                 **options):
        """Strings in, strings out: a causal LM's prompt followed by its continuation,
        an encoder-decoder's output text (up to and without the end token or the first
        stop); a str for a str.

        Args:
            sampler: "greedy", "top_k", "top_p", "beam" (or a `generation.Sampler`).
            options: temperature, top_k, top_p; seed (an int, one per prompt, or None:
                fresh randomness; a row's draws depend only on its seed, its sequence
                index and the step); jit_compile (None: XLA; False: the plain graph);
                num_beams, length_penalty, early_stopping (beam search);
                repetition_penalty, no_repeat_ngram_size, min_new_tokens (any
                sampler); stop (strings and/or token ids); num_return_sequences;
                return_scores (dicts with token ids and log-probabilities instead of
                strings). See `kbert.models.generation`; `generate_ids` works on token
                ids, `stream` yields a causal LM's text as it comes.
        """
        from kbert.models import generation

        run = generation.seq2seq_text if self.is_encoder_decoder else generation.generate_text
        return run(self, prompts, max_new_tokens=max_new_tokens, sampler=sampler, **options)

    def generate_ids(self, token_ids, padding_mask, max_new_tokens: int = 32,
                     sampler: str = "greedy", **options):
        """New token ids [B * num_return_sequences, max_new_tokens] after left- or
        right-padded prompts [B, P] (an encoder-decoder's: its encoder's inputs; the
        decoder's prompt is not among them); after a row's end token, the end token
        again (`end_token_id=None`: never stops). `options`: `generate`'s but
        `return_scores` (`generation.generate_sequences` gives log-probabilities)."""
        from kbert.models import generation

        return generation.generate_ids(self, token_ids, padding_mask, max_new_tokens,
                                       sampler=sampler, **options)

    def stream(self, prompt: str, max_new_tokens: int = 32, sampler: str = "greedy",
               **options):
        """Yields one prompt's continuation in pieces as its tokens are decoded (whole
        UTF-8 characters); the pieces join to `generate`'s continuation. Takes
        `generate`'s settings except beam search, several sequences and scores; causal
        LMs only."""
        if self.is_encoder_decoder:
            raise NotImplementedError(f"{type(self).__name__}.stream: streaming is for "
                                      "causal LMs; use generate")
        from kbert.models import generation

        return generation.stream_text(self, prompt, max_new_tokens=max_new_tokens,
                                      sampler=sampler, **options)
