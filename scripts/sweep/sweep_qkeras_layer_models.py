"""The sweep's conv and graph models: CNNs (2-D, 1-D, separable, transpose), folded batchnorm,
an autoencoder, residual and multi-input/output graphs, plain Keras layers mixed with Q-layers,
a Sequential MLP, and the edge cases of padding and strides."""


def layer_builders(K, Q):  # noqa: C901, PLR0915 - one table of small model builders
    """name -> zero-argument builder of a model; ``K`` is the Keras module, ``Q`` qkeras."""
    L = K.layers
    qb, qr = Q.quantized_bits, Q.quantized_relu

    def dense(n, kq, name, bq=None, **kw):
        return Q.QDense(n, kernel_quantizer=kq, bias_quantizer=bq, name=name, **kw)

    def cnn2d():
        x = K.Input((12, 12, 1), name="image")
        h = Q.QConv2D(4, 3, kernel_quantizer=qb(6, 0, alpha=1), bias_quantizer=qb(6, 0), name="c1")(
            x
        )
        h = Q.QBatchNormalization(name="bn1")(h)
        h = Q.QActivation("quantized_relu(6,2)", name="r1")(h)
        h = L.MaxPooling2D(2, name="pool1")(h)
        h = Q.QConv2D(6, 3, padding="same", kernel_quantizer=qb(6, 0, alpha=1), name="c2")(h)
        h = L.BatchNormalization(name="bn2")(h)
        h = Q.QActivation(qr(6, 2), name="r2")(h)
        h = L.Flatten(name="flat")(h)
        h = L.Dropout(0.2, name="drop")(h)
        h = dense(5, qb(6, 0, alpha=1), "head")(h)
        h = L.Activation("softmax", name="softmax")(h)
        return K.Model(x, h, name="cnn2d")

    def folded_bn():
        x = K.Input((8, 8, 3), name="image")
        h = Q.QConv2DBatchnorm(
            4, 3, kernel_quantizer=qb(6, 0, alpha=1), bias_quantizer=qb(10, 4, alpha=1), name="cbn"
        )(x)
        h = Q.QActivation(qr(6, 2), name="r1")(h)
        h = Q.QDepthwiseConv2DBatchnorm(
            3,
            depthwise_quantizer=qb(6, 0, alpha=1),
            bias_quantizer=qb(10, 4, alpha=1),
            name="dwbn",
        )(h)
        h = Q.QActivation(qr(6, 2), name="r2")(h)
        h = L.GlobalAveragePooling2D(name="gap")(h)
        return K.Model(x, h, name="folded_bn")

    def separable():
        x = K.Input((10, 10, 3), name="image")
        h = Q.QDepthwiseConv2D(
            3,
            depthwise_quantizer=qb(6, 0, alpha=1),
            bias_quantizer=qb(8, 3),
            name="dw",
        )(x)
        h = Q.QActivation(qr(6, 2), name="r1")(h)
        h = Q.QSeparableConv2D(
            4,
            3,
            padding="same",
            depthwise_quantizer=qb(6, 0, alpha=1),
            pointwise_quantizer=qb(6, 0, alpha=1),
            bias_quantizer=qb(8, 3),
            name="sep",
        )(h)
        h = Q.QActivation(qr(8, 3), name="r2")(h)
        h = Q.QAveragePooling2D(2, average_quantizer=qb(8, 2, alpha=1), name="avg")(h)
        h = Q.QGlobalAveragePooling2D(average_quantizer=qb(8, 2, alpha=1), name="gap")(h)
        return K.Model(x, h, name="separable")

    def conv1d():
        x = K.Input((20, 3), name="seq")
        h = Q.QConv1D(4, 3, kernel_quantizer=qb(6, 0, alpha=1), bias_quantizer=qb(8, 3), name="c1")(
            x
        )
        h = Q.QActivation(qr(6, 2), name="r1")(h)
        h = L.MaxPooling1D(2, name="pool")(h)
        h = Q.QSeparableConv1D(
            4,
            3,
            depthwise_quantizer=qb(6, 0, alpha=1),
            pointwise_quantizer=qb(6, 0, alpha=1),
            name="sep",
        )(h)
        h = Q.QActivation(qb(8, 3, alpha=1), name="a2")(h)
        h = L.Flatten(name="flat")(h)
        h = dense(3, qb(6, 0, alpha=1), "head")(h)
        return K.Model(x, h, name="conv1d")

    def autoencoder():
        x = K.Input((8, 8, 1), name="image")
        h = Q.QConv2D(
            4, 3, strides=2, padding="same", kernel_quantizer=qb(6, 0, alpha=1), name="e"
        )(x)
        h = Q.QActivation(qr(6, 2), name="r1")(h)
        h = L.UpSampling2D(2, name="up")(h)
        h = Q.QConv2DTranspose(
            3, 3, padding="same", kernel_quantizer=qb(6, 0, alpha=1), name="qdeconv"
        )(h)
        h = Q.QActivation(qr(6, 2), name="r2")(h)
        h = L.Conv2DTranspose(2, 2, strides=2, name="deconv")(h)
        h = Q.QConv2D(1, 3, padding="same", kernel_quantizer=qb(6, 0, alpha=1), name="d")(h)
        return K.Model(x, h, name="autoencoder")

    def residual():
        x = K.Input((8, 8, 2), name="image")
        a = Q.QConv2D(4, 3, padding="same", kernel_quantizer=qb(6, 0, alpha=1), name="c1")(x)
        a = Q.QActivation(qr(6, 2), name="r1")(a)
        b = Q.QConv2D(4, 3, padding="same", kernel_quantizer=qb(6, 0, alpha=1), name="c2")(a)
        b = Q.QActivation(qr(6, 2), name="r2")(b)
        s = L.Add(name="add")([a, b])
        s = Q.QActivation(qb(8, 4, alpha=1), name="a_add")(s)
        c = L.Concatenate(name="cat")([s, a])
        c = Q.QConv2D(2, 1, kernel_quantizer=qb(6, 0, alpha=1), name="c3")(c)
        c = L.GlobalAveragePooling2D(name="gap")(c)
        return K.Model(x, c, name="residual")

    def plain_mix():
        x = K.Input((8, 8, 2), name="image")
        h = L.ZeroPadding2D(1, name="pad")(x)
        h = Q.QConv2D(4, 3, kernel_quantizer=qb(6, 0, alpha=1), name="c1")(h)
        h = L.BatchNormalization(name="bn")(h)
        h = Q.QActivation(qr(6, 2), name="r1")(h)
        h = L.Cropping2D(((1, 0), (0, 1)), name="crop")(h)
        h = L.MaxPooling2D(2, name="pool")(h)
        h = L.Permute((2, 1, 3), name="perm")(h)
        h = L.Reshape((9, 4), name="reshape")(h)
        h = Q.QConv1D(3, 2, kernel_quantizer=qb(6, 0, alpha=1), name="c1d")(h)
        h = L.Dropout(0.1, name="drop")(h)
        h = L.Flatten(name="flat")(h)
        h = dense(3, qb(6, 0, alpha=1), "head")(h)
        return K.Model(x, h, name="plain_mix")

    def sequential_mlp():
        return K.Sequential(
            [
                K.Input((6,)),
                dense(8, qb(4, 0, alpha=1), "fc1"),
                Q.QActivation("quantized_relu(4,0)", name="r1"),
                L.Dropout(0.1),
                dense(3, qb(4, 0, alpha=1), "fc2"),
            ],
            name="sequential_mlp",
        )

    def edge_conv():
        x = K.Input((9, 9, 2), name="image")
        h = Q.QActivation(qb(8, 0, alpha=1), name="in_q")(x)
        h = Q.QConv2D(
            4,
            3,
            strides=2,
            padding="same",
            use_bias=False,
            kernel_quantizer=qb(4, 0, alpha=1),
            activation="quantized_relu(4,0)",
            name="c_same_s2",
        )(h)
        h = Q.QDepthwiseConv2D(
            3, depth_multiplier=2, padding="same", depthwise_quantizer=qb(5, 0, alpha=1), name="dw2"
        )(h)
        h = L.LeakyReLU(0.1, name="leaky")(h)
        h = Q.QConv2D(3, 2, dilation_rate=2, kernel_quantizer=Q.ternary(), name="dil_ter")(h)
        h = L.ReLU(max_value=2.0, name="relu6ish")(h)
        h = Q.QSeparableConv2D(
            4,
            2,
            depth_multiplier=2,
            depthwise_quantizer=qb(5, 0, alpha=1),
            pointwise_quantizer=Q.binary(),
            name="sep_dm2",
        )(h)
        h = Q.QAveragePooling2D(1, name="avg_plain")(h)
        h = Q.QGlobalAveragePooling2D(name="gap_plain")(h)
        h = L.Softmax(name="softmax")(h)
        return K.Model(x, h, name="edge_conv")

    def edge_conv1d():
        x = K.Input((16, 2), name="seq")
        h = Q.QConv1D(
            4, 3, padding="causal", dilation_rate=2, kernel_quantizer=qb(6, 0, alpha=1), name="c"
        )(x)
        h = Q.QActivation("quantized_relu(3)", name="r")(h)
        h = Q.QConv1D(4, 3, strides=2, padding="same", kernel_quantizer=qb(6, 0), name="c2")(h)
        h = L.UpSampling1D(2, name="up")(h)
        h = Q.QActivation("quantized_bits(8,0)", name="a")(h)
        h = L.GlobalMaxPooling1D(name="gmp")(h)
        return K.Model(x, h, name="edge_conv1d")

    def edge_transpose():
        x = K.Input((4, 4, 2), name="image")
        h = Q.QConv2DTranspose(
            3,
            3,
            strides=2,
            padding="valid",
            kernel_quantizer=qb(6, 0, alpha=1),
            bias_quantizer=qb(8, 3),
            name="t_valid",
        )(x)
        h = Q.QActivation(qr(6, 2), name="r")(h)
        h = L.UpSampling2D(2, interpolation="bilinear", name="bilinear")(h)
        h = Q.QConv2DTranspose(
            2, 2, strides=2, padding="same", kernel_quantizer=qb(4, 0, alpha="auto"), name="t_same"
        )(h)
        return K.Model(x, h, name="edge_transpose")

    def multi_io():
        a = K.Input((6,), name="a")
        b = K.Input((4,), name="b")
        inner = K.Sequential(
            [
                K.Input((6,)),
                dense(5, qb(6, 0, alpha=1), "in_fc"),
                Q.QActivation(qr(6, 2), name="in_r"),
            ],
            name="inner",
        )
        h = inner(a)
        g = dense(5, qb(6, 0, alpha=1), "b_fc")(b)
        s = L.Multiply(name="mul")([h, g])
        s = Q.QActivation(qb(8, 3, alpha=1), name="s_q")(s)
        c = L.Concatenate(name="cat")([s, b])
        o1 = dense(3, qb(6, 0, alpha=1), "o1")(c)
        o2 = L.Subtract(name="sub")([h, g])
        return K.Model([a, b], [o1, o2], name="multi_io")

    return {
        f.__name__: f
        for f in (
            cnn2d,
            folded_bn,
            separable,
            conv1d,
            autoencoder,
            residual,
            plain_mix,
            sequential_mlp,
            edge_conv,
            edge_conv1d,
            edge_transpose,
            multi_io,
        )
    }
