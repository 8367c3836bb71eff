"""The sweep's MLPs, one per quantizer family people ship (jet tagging with fixed and 'auto'
alphas, bit-width combinations, per-channel and po2 scales, relu/tanh/sigmoid variants, hard
activations as strings, binary/ternary, stochastic, bernoulli, ulaw, hswish)."""


def quantizer_builders(K, Q):  # noqa: C901, PLR0915 - one table of small model builders
    """name -> zero-argument builder of a model; ``K`` is the Keras module, ``Q`` qkeras."""
    L = K.layers
    qb, qr = Q.quantized_bits, Q.quantized_relu

    def dense(n, kq, name, bq=None, **kw):
        return Q.QDense(n, kernel_quantizer=kq, bias_quantizer=bq, name=name, **kw)

    def jet_mlp():
        x = K.Input((16,), name="jets")
        h = dense(32, qb(6, 0, alpha=1), "fc1", qb(6, 0, alpha=1))(x)
        h = Q.QBatchNormalization(name="bn1")(h)
        h = Q.QActivation("quantized_relu(6,0)", name="relu1")(h)
        h = dense(16, qb(6, 0, alpha=1), "fc2", qb(6, 0, alpha=1))(h)
        h = Q.QActivation(qr(6, 0), name="relu2")(h)
        h = dense(5, qb(6, 0, alpha=1), "out", qb(6, 0, alpha=1))(h)
        h = L.Activation("softmax", name="softmax")(h)
        return K.Model(x, h, name="jet_mlp")

    def jet_mlp_auto():
        x = K.Input((16,), name="jets")
        h = dense(16, qb(4, 0, alpha="auto"), "fc1", qb(8, 3))(x)
        h = Q.QActivation("quantized_relu(4,0)", name="relu1")(h)
        h = dense(12, qb(4, 0, alpha="auto_po2"), "fc2")(h)
        h = Q.QBatchNormalization(
            gamma_quantizer=qb(6, 2, alpha=1),
            beta_quantizer=qb(6, 2, alpha=1),
            mean_quantizer=qb(6, 2, alpha=1),
            variance_quantizer=qb(6, 2, alpha=1),
            name="qbn",
        )(h)
        h = Q.QActivation(qb(8, 3, alpha=1), name="act2")(h)
        h = dense(5, qb(3, 0, alpha=1, symmetric=1), "out")(h)
        return K.Model(x, h, name="jet_mlp_auto")

    def bits_combos():
        x = K.Input((10,), name="x")
        h = dense(8, qb(4, 0, symmetric=1, alpha=1), "sym")(x)
        h = Q.QActivation(qb(4, 2, keep_negative=False), name="unsigned")(h)
        h = dense(8, qb(4, 2, keep_negative=False, alpha=1), "kunsigned")(h)
        h = Q.QActivation(qb(6, 2, symmetric=1), name="act_sym")(h)
        h = dense(8, qb(3, 1, alpha="auto", symmetric=1), "auto_sym")(h)
        h = Q.QActivation(qb(2, 1), name="act_2bit")(h)
        h = dense(8, qb(8, 0, alpha="auto_po2", keep_negative=False), "po2_unsigned")(h)
        h = Q.QActivation(qb(8, 4, alpha=1), name="act8")(h)
        h = dense(6, qb(1, 0, alpha=1), "one_bit")(h)
        h = Q.QActivation(qb(5, 5, keep_negative=False, alpha=1), name="act_int")(h)
        h = dense(4, qb(6, 2, alpha=1, symmetric=1, keep_negative=True), "wide")(h)
        return K.Model(x, h, name="bits_combos")

    def per_channel():
        x = K.Input((8, 8, 2), name="image")
        h = Q.QConv2D(4, 3, kernel_quantizer=qb(4, 0, alpha="auto"), name="c1")(x)
        h = Q.QActivation(qr(6, 2), name="r1")(h)
        h = Q.QConv2D(4, 3, kernel_quantizer=qb(4, 0, alpha="auto_po2"), name="c2")(h)
        h = Q.QActivation(qb(8, 3, alpha=1), name="act")(h)
        h = L.Flatten(name="flat")(h)
        h = dense(3, qb(5, 0, alpha="auto", keep_negative=False), "fc")(h)
        return K.Model(x, h, name="per_channel")

    def dynamic_alpha():
        """alpha='auto_po2' on an activation: the scale follows each batch's values."""
        x = K.Input((8,), name="x")
        h = dense(8, qb(6, 0, alpha=1), "fc1")(x)
        h = Q.QActivation(qb(8, 3, alpha="auto_po2"), name="act_auto_po2")(h)
        return K.Model(x, h, name="dynamic_alpha")

    def po2():
        x = K.Input((8,), name="x")
        h = dense(8, Q.quantized_po2(4), "po2_k")(x)
        h = Q.QActivation(Q.quantized_relu_po2(4, max_value=4), name="relu_po2")(h)
        h = dense(8, Q.quantized_po2(5, max_value=1), "po2_max")(h)
        h = Q.QActivation(Q.quantized_po2(5, max_value=8), name="act_po2")(h)
        h = dense(4, qb(6, 0, alpha=1), "out")(h)
        return K.Model(x, h, name="po2")

    def relu_variants():
        x = K.Input((8,), name="x")
        h = dense(8, qb(6, 0, alpha=1), "fc1")(x)
        h = Q.QActivation(qr(4, 2, negative_slope=0.25), name="leaky")(h)
        h = dense(8, qb(6, 0, alpha=1), "fc2")(h)
        h = Q.QActivation(qr(8, 3, relu_upper_bound=4), name="bounded")(h)
        h = dense(8, qb(6, 0, alpha=1), "fc3")(h)
        h = Q.QActivation(qr(3, 0), name="relu30")(h)
        h = dense(4, qb(6, 0, alpha=1), "fc4", activation=qr(5, 1))(h)
        return K.Model(x, h, name="relu_variants")

    def tanh_sigmoid():
        x = K.Input((8,), name="x")
        h = dense(8, qb(6, 0, alpha=1), "fc1")(x)
        h = Q.QActivation(Q.quantized_tanh(4), name="tanh")(h)
        h = dense(8, qb(6, 0, alpha=1), "fc2")(h)
        h = Q.QActivation(Q.quantized_sigmoid(6), name="sigmoid")(h)
        h = dense(8, qb(6, 0, alpha=1), "fc3")(h)
        h = Q.QActivation(Q.quantized_tanh(6, symmetric=True), name="tanh_sym")(h)
        h = dense(8, qb(6, 0, alpha=1), "fc4")(h)
        h = Q.QActivation(Q.quantized_sigmoid(4, symmetric=True), name="sigmoid_sym")(h)
        return K.Model(x, h, name="tanh_sigmoid")

    def real_tanh_sigmoid():
        x = K.Input((8,), name="x")
        h = dense(8, qb(6, 0, alpha=1), "fc1")(x)
        h = Q.QActivation(Q.quantized_tanh(8, use_real_tanh=True), name="real_tanh")(h)
        h = dense(8, qb(6, 0, alpha=1), "fc2")(h)
        h = Q.QActivation(Q.quantized_sigmoid(6, use_real_sigmoid=True), name="real_sig")(h)
        h = dense(8, qb(6, 0, alpha=1), "fc3")(h)
        h = Q.QActivation(qr(6, 2, use_sigmoid=1), name="relu_sigmoid")(h)
        return K.Model(x, h, name="real_tanh_sigmoid")

    def hard_strings():
        x = K.Input((8,), name="x")
        h = dense(8, qb(6, 0, alpha=1), "fc1")(x)
        h = Q.QActivation("hard_sigmoid", name="hsig")(h)
        h = dense(8, qb(6, 0, alpha=1), "fc2")(h)
        h = Q.QActivation("quantized_tanh(4)", name="tanh_s")(h)
        h = dense(8, qb(6, 0, alpha=1), "fc3")(h)
        h = Q.QActivation("quantized_bits(6,2,1)", name="bits_s")(h)
        h = dense(8, qb(6, 0, alpha=1), "fc4", activation="quantized_relu(4,0)")(h)
        h = Q.QActivation("binary", name="bin_s")(h)
        h = dense(4, qb(6, 0, alpha=1), "fc5")(h)
        h = Q.QActivation("quantized_sigmoid(4)", name="sig_s")(h)
        return K.Model(x, h, name="hard_strings")

    def binary_ternary():
        x = K.Input((8,), name="x")
        h = dense(8, Q.binary(alpha=1), "bin_k")(x)
        h = Q.QActivation(Q.binary(use_01=True), name="bin01")(h)
        h = dense(8, Q.ternary(alpha=1), "ter_k")(h)
        h = Q.QActivation(Q.ternary(threshold=0.3), name="ter_act")(h)
        h = dense(8, Q.binary(alpha="auto"), "bin_auto")(h)
        h = Q.QActivation(Q.binary(), name="sign")(h)
        h = dense(4, Q.ternary(alpha="auto_po2"), "ter_po2")(h)
        return K.Model(x, h, name="binary_ternary")

    def stochastic():
        x = K.Input((8,), name="x")
        h = dense(8, qb(6, 0, alpha=1), "fc1")(x)
        h = Q.QActivation(Q.stochastic_binary(), name="sbin")(h)
        h = dense(8, qb(6, 0, alpha=1), "fc2")(h)
        return K.Model(x, h, name="stochastic")

    def bernoulli():
        x = K.Input((8,), name="x")
        h = dense(8, qb(6, 0, alpha=1), "fc1")(x)
        h = Q.QActivation(Q.bernoulli(), name="bern")(h)
        h = dense(4, qb(6, 0, alpha=1), "fc2")(h)
        return K.Model(x, h, name="bernoulli")

    def ulaw_hswish():
        x = K.Input((8,), name="x")
        h = dense(8, qb(6, 0, alpha=1), "fc1")(x)
        h = Q.QActivation(Q.quantized_ulaw(8, 0), name="ulaw")(h)
        h = dense(8, qb(6, 0, alpha=1), "fc2")(h)
        h = Q.QActivation(Q.quantized_hswish(8, 3), name="hswish")(h)
        h = dense(4, qb(6, 0, alpha=1), "fc3")(h)
        return K.Model(x, h, name="ulaw_hswish")

    return {
        f.__name__: f
        for f in (
            jet_mlp,
            jet_mlp_auto,
            bits_combos,
            per_channel,
            dynamic_alpha,
            po2,
            relu_variants,
            tanh_sigmoid,
            real_tanh_sigmoid,
            hard_strings,
            binary_ternary,
            stochastic,
            bernoulli,
            ulaw_hswish,
        )
    }
