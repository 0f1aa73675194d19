"""Text handling every stage shares, so that a script range or a normalisation rule is written
once and reaches every stage.

- ``scripts``: the Unicode blocks of CJK text, named by width (``HAN``, ``CJK``, ...).
- ``normalise``: the forms texts are compared in, from collapsed white space to the
  punctuation-free comparison form.
- ``terms``: search terms (stemmed words without stop words, CJK bigrams); ``stem``: the
  Porter stemmer.
- ``similarity``: token-set Jaccard and character-bigram Jaccard.
- ``tokens``: cl100k token counts; ``dates``: relative dates made absolute.
"""
