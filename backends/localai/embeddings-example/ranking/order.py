def ranked(scores, top_n=0):
    """Indexes of ``scores``, best first; the first ``top_n`` when it is positive."""
    order = sorted(range(len(scores)), key=lambda i: scores[i], reverse=True)
    return order[:top_n] if top_n > 0 else order
