"""What agents read: listings, grep, bounded reads, the context block, and what is said of keyed facts."""
