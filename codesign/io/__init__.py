"""codesign/io"""
