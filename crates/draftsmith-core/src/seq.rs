//! Helpers on sequences (token ids, shard hashes).

/// How many leading elements `a` and `b` share.
pub fn common_prefix<T: PartialEq>(a: &[T], b: &[T]) -> usize {
    a.iter().zip(b).take_while(|(x, y)| x == y).count()
}

#[cfg(test)]
mod tests {
    use super::common_prefix;

    #[test]
    fn common_prefix_stops_at_the_first_difference_or_the_shorter_end() {
        assert_eq!(common_prefix(&[1u32, 2, 3], &[1, 2, 4]), 2);
        assert_eq!(common_prefix(&[1u32, 2], &[1, 2, 3]), 2);
        assert_eq!(common_prefix::<u32>(&[], &[1]), 0);
        assert_eq!(common_prefix(&["a", "b"], &["b", "a"]), 0);
    }
}
