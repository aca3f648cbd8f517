//! "Did you mean …?": the known name nearest a misspelt one, by edit distance.
//!
//! Used for unknown keys (serde's `unknown field` messages), environment variables, GPU presets,
//! streams, tensors, groups, marks and op labels, so an error names the likely fix instead of
//! listing every option.

/// The candidate nearest `word` by Damerau–Levenshtein distance (case-insensitive), when it is
/// close enough to be a typo: at most a third of the longer name's characters, and at least one.
/// Ties go to the candidate that sorts first, so the answer does not depend on the order the
/// candidates come in (callers pass the keys of hash maps, whose order changes from process to
/// process: the same scenario must give the same error).
pub fn nearest<'a>(word: &str, candidates: impl IntoIterator<Item = &'a str>) -> Option<&'a str> {
    let lower = word.to_lowercase();
    candidates
        .into_iter()
        .filter_map(|candidate| {
            let distance = strsim::damerau_levenshtein(&lower, &candidate.to_lowercase());
            let longer = word.chars().count().max(candidate.chars().count());
            let allowed = (longer / 3).max(1);
            (distance <= allowed).then_some((distance, candidate))
        })
        .min()
        .map(|(_, candidate)| candidate)
}

/// `"; did you mean \"X\"?"` for the nearest candidate, or nothing.
pub fn did_you_mean<'a>(word: &str, candidates: impl IntoIterator<Item = &'a str>) -> String {
    nearest(word, candidates)
        .map(|found| format!("; did you mean {found:?}?"))
        .unwrap_or_default()
}

/// serde's unknown-field message (`unknown field `rankz`, expected one of `ranks`, `gpu``)
/// shortened to the nearest expected field when there is one (`unknown field `rankz`; did you
/// mean `ranks`?`), else left listing every field; any other message unchanged.
pub fn explain_unknown_field(message: &str) -> String {
    let Some(rest) = message.strip_prefix("unknown field ") else {
        return message.to_string();
    };
    let mut quoted = rest.split('`').skip(1).step_by(2);
    let Some(field) = quoted.next() else {
        return message.to_string();
    };
    match nearest(field, quoted) {
        Some(found) => format!("unknown field `{field}`; did you mean `{found}`?"),
        None => message.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_typos_and_refuses_strangers() {
        let env = ["TORCH_NCCL_BLOCKING_WAIT", "TORCH_NCCL_HIGH_PRIORITY"];
        assert_eq!(
            nearest("TORCH_NCCL_BLOCKING_WAITT", env),
            Some("TORCH_NCCL_BLOCKING_WAIT")
        );
        assert_eq!(
            nearest("torch_nccl_high_priorty", env),
            Some("TORCH_NCCL_HIGH_PRIORITY")
        );
        assert_eq!(nearest("NCCL_DEBUG", env), None);
        assert_eq!(nearest("bfu", ["buf", "grad"]), Some("buf"));
        assert_eq!(nearest("x", ["y"]), Some("y"), "one edit is always allowed");
        assert_eq!(nearest("xy", ["ab"]), None);
        assert_eq!(
            did_you_mean("sid", ["side", "main"]),
            "; did you mean \"side\"?"
        );
        assert_eq!(did_you_mean("zzzz", ["side"]), "");
    }

    #[test]
    fn a_tie_goes_to_the_same_candidate_whatever_order_they_come_in() {
        // Callers pass the keys of hash maps, whose order changes from process to process.
        let tied = ["ad", "ab", "ae", "ac"];
        assert_eq!(nearest("aa", tied), Some("ab"));
        assert_eq!(nearest("aa", tied.iter().rev().copied()), Some("ab"));
        assert_eq!(did_you_mean("aa", ["ac", "ab"]), "; did you mean \"ab\"?");
    }

    #[test]
    fn unknown_field_messages_gain_the_nearest_field() {
        assert_eq!(
            explain_unknown_field("unknown field `rankz`, expected one of `ranks`, `gpu`"),
            "unknown field `rankz`; did you mean `ranks`?"
        );
        assert_eq!(
            explain_unknown_field("unknown field `all_reduc`, expected `all_reduce` or `wait`"),
            "unknown field `all_reduc`; did you mean `all_reduce`?"
        );
        let far = "unknown field `zzz`, expected `ranks`";
        assert_eq!(explain_unknown_field(far), far);
        assert_eq!(explain_unknown_field("invalid type"), "invalid type");
    }
}
